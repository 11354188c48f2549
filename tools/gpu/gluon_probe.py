#!/usr/bin/env python3
"""Check and time softbench's Gluon forward (softbench.kernels.gluon_attn) on the GPU host.

    python3 tools/gpu/gluon_probe.py OUTDIR [--fa4] [--only=bf16,fp8,fp16] [--checks-only] [--check-configs=L1,L2]
        [--check-variants=A1,h15-proved] [--check-shapes=0,1,2] [--repeat-equal=N] [--long-checks]
        [--timing-only=fp8]
    (from the repository root, on the GPU host)

1. Correctness on small and ragged shapes (BF16 and FP8, GQA, head dims 64 and 128, causal and not, seq not a
   multiple of the tiles): each variant's output against softbench's tile-wise simulation of the same operator
   (softbench.kernels.sim, key tiles of the kernel's size; row sums of the rounded P for -lm and -lmt, A0's lazy
   maximum for -rl), and, where the
   Triton kernel's table uses the same key tile, against its output (the same operator: equal bit for bit
   expected). h15-proved is also compared with A1 of the same kernel (equal bit for bit on every input), on the
   shapes and on inputs whose query norms are scaled up until the proof fails for some heads and A1's clamp binds
   (CLAMP_SHAPES). A configuration that skips O's rescale where no row's maximum moved (-rs), that issues it
   beside the next Q.K^T (-ro), or that leaves out the warpgroup barriers before the mbarrier waits and releases
   (-tb), is also compared with the same configuration without them: equal bit for bit on every input; with
   --repeat-equal=N such configurations among --check-configs also run N times at the benchmark's shape against
   their plain form (repeated_equality). With --long-checks, the --check-configs and the dtype's default
   configuration against exact FP32 attention at the benchmark's shapes, FA3 beside them (long_checks).
2. Timing at b1 h16 d128 seq 8192: BF16 causal and non-causal, FP8 causal; the Gluon configurations in
   CANDIDATES, the Triton kernel's table configuration and, with --fa4, stock FA4 (flash_attn.cute, BF16) in this
   same process. Same timing as triton_probe: 10 warm-up calls, 3 windows of 20 calls, median window. A screening
   probe, not a session.

Writes OUTDIR/gluon_probe.json and prints a table."""

from __future__ import annotations

import json
import math
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tools/gpu: triton_probe's timing

import torch  # noqa: E402

from softbench.kernels import gluon_attn as ga  # noqa: E402
from softbench.kernels import triton_attn as ta  # noqa: E402
from softbench.kernels.refs import relative_error  # noqa: E402
from softbench.kernels.sim import sim_attention  # noqa: E402
from softbench.kernels.catalog import get_variant  # noqa: E402
from softbench.kernels.sim_weights import SIM_WEIGHTS  # noqa: E402
from softbench.kernels.gluon_config import GluonConfig, default_config  # noqa: E402
from triton_probe import CALLS, WARMUP, WINDOWS, time_forward  # noqa: E402  (this folder: the same timing)

# per dtype: (configuration, timed with every variant rather than A0 alone)
CANDIDATES = {
    "bf16": [(GluonConfig(), True), (GluonConfig(pingpong=True), True), (GluonConfig(head_group=16), False),
             (GluonConfig(block_n=64, stages=4), False)],
    "fp8": [(GluonConfig(stages=4), True), (GluonConfig(stages=2, consumers=1), True),
            (GluonConfig(stages=4, pingpong=True), False), (GluonConfig(stages=3), False),
            (GluonConfig(block_n=64, stages=4, consumers=1), False)],
}
CHECK_CONFIGS = (GluonConfig(), GluonConfig(block_n=64, stages=3), GluonConfig(pingpong=True))
CHECK_SHAPES = [  # (batch, seq, heads, kv_heads, head_dim, causal)
    (1, 1000, 4, 2, 128, True),
    (1, 1000, 4, 2, 128, False),
    (2, 384, 4, 4, 64, True),
    (2, 200, 2, 1, 64, False),
    (1, 2048, 8, 8, 128, True),
    (1, 100, 2, 2, 128, True),  # one key tile: no loop iteration
    # more query blocks than the H200 runs programs at once (132 SMs): the persistent schedules take several per
    # program (-pt in rounds, -pd from the counter), with a ragged last block
    (2, 4000, 16, 8, 128, True),
    (3, 1500, 12, 4, 64, False),
]
# (batch, seq, heads, kv_heads, head_dim, causal): query heads 0 and 2 scaled by CLAMP_SCALE, so that their proof
# fails and some of their weights sit at the clamp (A1's 2^-126), the other heads' proof holds
CLAMP_SHAPES = [(1, 1000, 4, 2, 128, True), (1, 640, 4, 4, 64, False)]
CLAMP_SCALE = 60.0
CHECK_VARIANTS = ("A0", "A1", "h15-proved", "h15-sat", "h15-folded", "h15-1of2", "h15-1of4",
                  "h15-noclamp")
DTYPES = {"bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn, "fp16": torch.float16}
TOLERANCE = {"bf16": 1e-2, "fp8": 5e-2, "fp16": 1e-2}  # relative to the tile-wise reference; a lost or doubled tile shows at 1e-1


def reference(q, k, v, causal: bool, variant: str, config) -> torch.Tensor:
    """softbench's tile-wise simulation of the same operator (sim_attention: online softmax over key tiles of the
    kernel's size, the weights re-anchored at each tile's running maximum, P rounded to the input dtype), through
    the catalog's operator of the variant (h15-proved and h15-noclamp: Rowmax-H15's); with row sums of the rounded
    P where the configuration sums on the tensor core (-lm, -lmt), and the lazy maximum under -rl (A0's) and -rla
    (A0's and h15-folded's anchor)."""
    fp8 = q.dtype == torch.float8_e4m3fn
    return sim_attention(q, k, v, causal, SIM_WEIGHTS.get(get_variant(variant).operator), tile=config.block_n,
                         sum_rounded=config.row_sum.startswith("mma"),
                         rescale_threshold=ga.lazy_threshold(config, fp8, variant),
                         max_offset=ga.max_offset(config, fp8, variant))


def checks(rows: list, dtypes: dict, check_configs=CHECK_CONFIGS, variants=CHECK_VARIANTS, shapes=None) -> None:
    """shapes: indices into CHECK_SHAPES + CLAMP_SHAPES (None: all)."""
    g = torch.Generator().manual_seed(7)
    for dtype_name, dtype in dtypes.items():
        cases = [(shape, 1.0) for shape in CHECK_SHAPES] + [(shape, CLAMP_SCALE) for shape in CLAMP_SHAPES]
        cases = [c for i, c in enumerate(cases) if shapes is None or i in shapes]
        for (b, s, h, hk, d, causal), scale in cases:
            q = torch.randn(b, s, h, d, generator=g)
            q[:, :, ::2] *= scale
            q = q.clamp(-440, 440).to(dtype).cuda()  # inside E4M3's range (448)
            k = torch.randn(b, s, hk, d, generator=g).to(dtype).cuda()
            v = torch.randn(b, s, hk, d, generator=g).to(dtype).cuda()
            a1: dict = {}  # config label -> this kernel's A1 output, for h15-proved's bit-for-bit comparison
            # where the clamp binds h15-noclamp is wrong on purpose: not checked there
            for variant in (x for x in variants if scale == 1.0 or x != "h15-noclamp"):
                for config in check_configs:
                    row = {"check": [dtype_name, b, s, h, hk, d, causal], "variant": variant,
                           "config": config.label(), **({"query_scale": scale} if scale != 1.0 else {})}
                    try:
                        out = ga.attention(q, k, v, causal, variant, config)
                        torch.cuda.synchronize()
                        ref = reference(q, k, v, causal, variant, config)
                        row.update(rel_vs_ref=relative_error(out, ref), finite=bool(torch.isfinite(out.float()).all()))
                        tcfg = ta.default_config(dtype, d)
                        if tcfg.block_n == config.block_n:  # the same tiles: the same operator, bit for bit expected
                            tri = ta.attention(q, k, v, causal, variant)
                            row["max_abs_vs_triton_same_tile"] = float((out.float() - tri.float()).abs().max())
                        row["ok"] = row["finite"] and row["rel_vs_ref"] < TOLERANCE[dtype_name]
                        plain_config = config.plain()
                        if plain_config != config:  # -rs, -ro and -tb change no bit: the same kernel without them
                            plain = ga.attention(q, k, v, causal, variant, plain_config)
                            row["plain_config"] = plain_config.label()
                            row["equals_plain"] = bool(torch.equal(out, plain))
                            row["ok"] = row["ok"] and row["equals_plain"]
                        if variant == "A1":
                            a1[config.label()] = out.clone()
                        elif variant == "h15-proved" and config.label() in a1:
                            row["proved_equals_a1"] = bool(torch.equal(out, a1[config.label()]))
                            row["ok"] = row["ok"] and row["proved_equals_a1"]
                    except Exception as e:
                        row["error"] = f"{type(e).__name__}: {str(e).strip()[:400]}"
                        row["traceback_tail"] = traceback.format_exc().strip().splitlines()[-4:]
                        row["ok"] = False
                    rows.append(row)
                    print(json.dumps(row), flush=True)


def repeated_equality(rows: list, dtypes: dict, configs, variants, runs: int) -> None:
    """Each configuration that differs from its plain form only in options that change no bit (-rs, -ro, -tb), run
    `runs` times at the benchmark's shape (b1 h16 d128, 8192, causal and not) against the plain form's output: a
    race that the small checks miss would show as a difference in some run."""
    g = torch.Generator().manual_seed(3)
    base = [torch.randn(1, 8192, 16, 128, generator=g) for _ in range(3)]
    for dtype_name, config in ((d, c) for d in dtypes for c in configs):
        plain_config = config.plain()
        q, k, v = (x.to(dtypes[dtype_name]).cuda() for x in base)
        for causal in (True, False):
            for variant in variants:
                row = {"repeat": [dtype_name, 1, 8192, 16, 16, 128, causal], "variant": variant,
                       "config": config.label(), "plain_config": plain_config.label(), "runs": runs}
                try:
                    plain = ga.attention(q, k, v, causal, variant, plain_config).clone()
                    ops = ga.prepare_operands(q, k, v, config)
                    differ = sum(not torch.equal(ga.launch(ops, causal, variant, config), plain) for _ in range(runs))
                    row.update(runs_differing=differ, ok=differ == 0)
                except Exception as e:
                    row.update(error=f"{type(e).__name__}: {str(e).strip()[:400]}", ok=False)
                rows.append(row)
                print(json.dumps(row), flush=True)


LONG_SEQS = (8192, 16384)
# a configuration's error against FP32 at the benchmark's shapes may exceed its dtype's default configuration's
# (FP32 row sums) by this factor: the tensor core's row sums over a whole row (-lm) doubled it at FP8 causal 8K
LONG_ERROR_FACTOR = 1.25


def long_checks(rows: list, dtypes: dict, configs, variants) -> None:
    """Each configuration's error against exact FP32 attention at the benchmark's shapes (b1 h16 d128, 8K and 16K,
    causal and not; softbench's inputs and check rows, as a latency run's smoke check), beside its dtype's default
    configuration's and FA3's on the same inputs: errors that grow with the row's length (the FP8 wgmma
    accumulator's truncation over a whole row of positive weights) are invisible on the small shapes of checks()
    and in a simulation that sums in FP32. A configuration passes when its error is within LONG_ERROR_FACTOR of the
    default's for the same variant."""
    from softbench.core.shapes import Shape
    from softbench.kernels.inputs import make_inputs
    from softbench.kernels.references import FA3Backend, fa3_module_name
    from softbench.kernels.refs import check_rows, reference_rows

    for dtype_name, seq, causal in ((d, s, c) for d in dtypes for s in LONG_SEQS for c in (True, False)):
        shape = Shape(dtype=dtype_name, seq=seq, causal=causal)
        inputs = make_inputs(shape, 0, "cuda")
        q_rows = check_rows(seq, 64).cuda()
        ref = reference_rows(inputs.q, inputs.k, inputs.v, causal, q_rows, descale=inputs.descale)
        gain = lambda out: float(((out * ref).sum(-1) / (ref * ref).sum(-1)).mean() - 1)  # noqa: E731
        case = [dtype_name, 1, seq, 16, 16, 128, causal]
        if fa3_module_name() is not None:
            fa3 = FA3Backend()
            fa3.load("A0")
            out = fa3.build(shape, inputs)()[:, q_rows].float()
            row = {"long": case, "kernel": "fa3", "variant": "A0", "rel_vs_fp32": relative_error(out, ref),
                   "gain_vs_fp32": gain(out)}
            rows.append(row)
            print(json.dumps(row), flush=True)
        default = default_config(DTYPES[dtype_name], 128)
        for variant in variants:
            base = None
            for config in (default, *(c for c in configs if c != default)):
                row = {"long": case, "config": config.label(), "variant": variant}
                try:
                    out = ga.attention(inputs.q, inputs.k, inputs.v, causal, variant, config,
                                       descale=inputs.descale)[:, q_rows].float()
                    row.update(rel_vs_fp32=relative_error(out, ref), gain_vs_fp32=gain(out))
                    if base is None:
                        base = row["rel_vs_fp32"]
                        row["default"] = True
                    row["ok"] = bool(math.isfinite(row["rel_vs_fp32"])) and row["rel_vs_fp32"] <= LONG_ERROR_FACTOR * base
                except Exception as e:
                    row.update(error=f"{type(e).__name__}: {str(e).strip()[:400]}", ok=False)
                rows.append(row)
                print(json.dumps(row), flush=True)


def timing(rows: list, fa4: bool, dtypes: dict) -> None:
    """Every variant at FP8 (the Triton kernel's and the Gluon configurations marked so), A0 alone at 16 bits."""
    b, s, h, d = 1, 8192, 16, 128
    g = torch.Generator().manual_seed(1)
    base = [torch.randn(b, s, h, d, generator=g) for _ in range(3)]
    for dtype_name, dtype in dtypes.items():
        q, k, v = (x.to(dtype).cuda() for x in base)
        for causal in (True, False) if dtype_name == "bf16" else (True,):
            flops = 4 * b * h * s * s * d / (2 if causal else 1)
            entries = []
            tcfg = ta.default_config(dtype, d)
            tops = ta.prepare_operands(q, k, v, tcfg)
            for variant in ("A0", "A1", "h15-proved", "h15-sat", "h15-folded", "h15-1of4", "noexp") \
                    if dtype_name == "fp8" else ("A0",):
                entries.append(("triton " + tcfg.label(), variant,
                                (lambda vv=variant: ta.launch(tops, causal, vv, tcfg))))
            for config, every_variant in CANDIDATES[dtype_name]:
                ops = ga.prepare_operands(q, k, v, config)
                for variant in ("A0", "A1", "h15-proved", "h15-sat", "h15-folded", "h15-1of2", "h15-1of4",
                                "h15-noclamp", "noexp") if every_variant else ("A0",):
                    entries.append((config.label(), variant,
                                    (lambda o=ops, c=config, vv=variant: ga.launch(o, causal, vv, c))))
            if fa4 and dtype_name == "bf16":
                import flash_attn.cute as fa
                entries.append(("fa4 stock", "A0", lambda: fa.flash_attn_func(q, k, v, causal=causal)))
            for name, variant, fn in entries:
                row = {"timing": f"{dtype_name} {'causal' if causal else 'noncausal'}", "kernel": name,
                       "variant": variant}
                try:
                    t0 = time.perf_counter()
                    out = fn()
                    out = out[0] if isinstance(out, tuple) else out
                    torch.cuda.synchronize()
                    row["first_call_s"] = round(time.perf_counter() - t0, 1)
                    ms = time_forward(fn)
                    row.update(ms=round(ms, 5), tflops=round(flops / (ms * 1e-3) / 1e12, 1))
                except Exception as e:
                    row["error"] = f"{type(e).__name__}: {str(e).strip()[:400]}"
                    row["traceback_tail"] = traceback.format_exc().strip().splitlines()[-4:]
                rows.append(row)
                print(json.dumps(row), flush=True)


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):  # --help, or an option where OUTDIR belongs: not a folder to make
        print(__doc__, file=sys.stderr)
        return 2
    out_dir = Path(argv[0])
    out_dir.mkdir(parents=True, exist_ok=True)
    import triton

    rows: list = []
    meta = {"device": torch.cuda.get_device_name(), "triton": triton.__version__, "torch": torch.__version__,
            "warmup": WARMUP, "windows": WINDOWS, "calls": CALLS, "kind": "screening probe, not a session"}
    only = [a.split("=", 1)[1] for a in argv if a.startswith("--only=")]
    dtypes = {k: v for k, v in DTYPES.items() if (k in only[0].split(",") if only else k != "fp16")}
    given = [a.split("=", 1)[1] for a in argv if a.startswith("--check-configs=")]
    variants = [a.split("=", 1)[1].split(",") for a in argv if a.startswith("--check-variants=")]
    timed = [a.split("=", 1)[1].split(",") for a in argv if a.startswith("--timing-only=")]
    shapes = [{int(i) for i in a.split("=", 1)[1].split(",")} for a in argv if a.startswith("--check-shapes=")]
    named = tuple(GluonConfig.from_label(x) for x in given[0].split(",")) if given else ()
    checks(rows, dtypes, named or CHECK_CONFIGS, tuple(variants[0]) if variants else CHECK_VARIANTS,
           shapes[0] if shapes else None)
    repeats = [int(a.split("=", 1)[1]) for a in argv if a.startswith("--repeat-equal=")]
    if repeats and named:
        repeated_equality(rows, dtypes, [c for c in named if c.plain() != c],
                          tuple(variants[0]) if variants else ("A0",), repeats[0])
    if "--long-checks" in argv:
        long_checks(rows, dtypes, named, tuple(variants[0]) if variants else ("A0",))
    if "--checks-only" not in argv:
        timing(rows, "--fa4" in argv, {k: v for k, v in dtypes.items() if not timed or k in timed[0]})
    # the fastest A0 per case and kernel (the checks cover the kernel's code paths, at two configurations)
    best: dict = {}
    for r in rows:
        if r.get("variant") == "A0" and "tflops" in r:
            kind = "triton" if r["kernel"].startswith("triton") else "fa4" if r["kernel"].startswith("fa4") else "gluon"
            key = f"{r['timing'].replace(' ', '-')}-{kind}"
            if key not in best or r["tflops"] > best[key]["tflops"]:
                best[key] = {"kernel": r["kernel"], "tflops": r["tflops"]}
    meta["best_a0"] = best
    (out_dir / "gluon_probe.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    return 0 if all(r.get("ok", True) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
