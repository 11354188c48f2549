#!/usr/bin/env python3
"""One hash per compiled Gluon kernel, for a refactor that must not change the kernel (no GPU needed).

    env -u TRITON_INTERPRET python tools/analysis/kernel_ptx_hashes.py OUT.txt     # before the change
    env -u TRITON_INTERPRET python tools/analysis/kernel_ptx_hashes.py OUT2.txt    # after it
    diff OUT.txt OUT2.txt

Each line is a case (dtype, head dim, causal, variant, label) compiled for sm_90a by softbench.kernels.triton_compile,
and a hash of its PTX. Line-number records, comments and the debug sections are left out, because moving code changes
them and not the kernel. Identical hashes mean the same instructions in the same order. The cases cover both
defaults under each variant family, one and two consumers, ping-pong, both persistent schedules, split Q.K^T,
emulated exponentials, the row-sum forms, -ro, non-causal, head dim 64, FP16 and a 64-key tile. Run on 2026-12-04
around gluon_options.KernelOptions: 36 of 36 identical; again around the deferred epilogue (-pde, whose two cases
were added after it), 36 of 36 identical once the inlined scopes' debug labels were left out of the hash; again
around the overlapped boundary (-pdo, whose two cases were added after it), 38 of 38 identical; again around the
producer's load order (-ka, 2026-12-04 17:00), 40 of 40 identical, after which the 16-bit default took -ka and two
cases were added: the paired 16-bit default of before and the FP8 default with -ka; again around V's ring of its own
(-v<N>, 2026-12-04 19:20), 42 of 42 identical, after which two cases with -v3 were added; again around the kernel's
V_STAGES default (0: as many as K's, 20:40), 44 of 44 identical; again with the producer's functions taking V's
ring as the kernel resolved it (no second default), 44 of 44 identical; again around the configuration's move out of the
kernel's module into softbench.kernels.gluon_config (2026-12-05 18:05), 44 of 44 identical; again around the
producer's functions' move into gluon_producer and the row sums' into gluon_row_sums (2026-12-05 20:20, with an
empty TRITON_CACHE_DIR, so that every case compiled afresh), 44 of 44 identical."""

from __future__ import annotations

import hashlib
import re
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout

from dataclasses import replace  # noqa: E402

from softbench.kernels.gluon_config import DEFAULT, DEFAULT_FP8, DEFAULT_SYNC, GluonConfig  # noqa: E402

PREFIX = "gluon-n128s2-c240l24-"
# the defaults as the backend runs them with Triton 3.6 (-tb), whatever they are when this runs
BF16_DEFAULT = replace(DEFAULT, sync=DEFAULT_SYNC).label()
FP8_DEFAULT = replace(DEFAULT_FP8, sync=DEFAULT_SYNC).label()
CASES = (
    [("bf16", 128, True, v, BF16_DEFAULT) for v in ("A0", "h15-sat", "A1", "noexp", "h15-proved", "h15-1of4")]
    + [("bf16", 128, True, "A0", PREFIX + s) for s in (
        "hg8", "hg8-pp", "hg8-ppn", "hg8-pt-rl-ro-ltt-pm-tb-mlf", "hg8-g1", "hg8-rs", "hg8-lm", "hg8-ro-lmt", "hg8-lt",
        "hg8-ml", "hg8-sq", "hg8-e16", "hg8-rl-ro-ltt-pm-tb-mlf", "hg16-pd-ltt", "hg4-pde-rl-ro-ltt-pm-tb-mlf",
        "hg4-pdo-rl-ro-ltt-tb-mlf", "hg4-pd-rl-ro-ltt-pm-tb-mlf", "hg4-pd-rl-ro-ltt-pm-tb-mlf-ka-v3",
        "hg8-v3")]
    + [("bf16", 128, False, "A0", BF16_DEFAULT), ("bf16", 64, True, "A0", BF16_DEFAULT),
       ("fp16", 128, True, "h15-sat", PREFIX + "hg8-rl-ro-ltt-pm-tb-mlf")]
    + [("fp8", 128, True, v, FP8_DEFAULT) for v in ("A0", "h15-folded", "A1", "h15-proved", "h15-sat")]
    + [("fp8", 128, True, "h15-folded", PREFIX + s) for s in (
        "hg2-rla-ro-lmt-tb", "hg2-pd-rla-ro-lmt-tb", "hg2-pd-rla-lmt-tb-mlf", "hg16-pt-rla-lmt-tb", "hg8",
        "hg8-g1-pde-rla-lmt-tb-mlf", "hg8-g1-pdo-rla-ro-ltt-tb-mlf", "hg8-g1-pd-rla-lmt-tb-mlf-ka")]
    + [("fp8", 128, True, "h15-folded", "gluon-n64s4-c240l24-hg8-g1"),
       ("fp8", 128, False, "A0", FP8_DEFAULT), ("fp8", 64, True, "A0", FP8_DEFAULT)])


_SCOPE_LABEL = re.compile(r"\$L__tmp\d+:")


def ptx_body_hash(ptx: str) -> str:
    """The PTX without its debug sections, line-number records, comments and the labels that only mark where an
    inlined function's scope begins for the debugger ($L__tmpN:, never a branch target), hashed."""
    body = ptx.split(".section\t.debug")[0]
    lines = [line.split("//")[0].rstrip() for line in body.splitlines()
             if not line.strip().startswith((".loc", ".file")) and not _SCOPE_LABEL.fullmatch(line.strip())]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def case_line(case: tuple) -> str:
    from softbench.core.shapes import Shape
    from softbench.kernels import triton_compile as tc

    dtype, head_dim, causal, variant, label = case
    try:
        kernel = tc.compile_kernel(Shape(dtype=dtype, seq=8192, causal=causal, head_dim=head_dim), variant,
                                   GluonConfig.from_label(label))
    except Exception as e:  # a case that no longer compiles is a finding, printed in its line
        return f"{case} ERROR {type(e).__name__}: {str(e).strip().splitlines()[0][:160]}"
    return f"{case} {ptx_body_hash(kernel.asm['ptx'])}"


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0].startswith("-"):  # --help is not a file to write
        print(__doc__, file=sys.stderr)
        return 2
    with ProcessPoolExecutor(2) as pool:
        lines = list(pool.map(case_line, CASES))
    Path(argv[0]).write_text("\n".join(lines) + "\n")
    errors = sum(" ERROR " in line for line in lines)
    print(f"{len(lines)} cases, {errors} not compiled: {argv[0]}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
