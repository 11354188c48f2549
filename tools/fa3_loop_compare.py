#!/usr/bin/env python3
"""FA3's key loop against softbench's Gluon kernel's, from static SASS, on a machine without a GPU
(docs/hopper-notes.md, "Where FA3's lead is not").

    pip download --no-deps fa3-fwd==0.0.3 -d /tmp/fa3      # FA3's forward as PyPI ships it (sm_90a cubins)
    .venv/bin/python tools/fa3_loop_compare.py /tmp/fa3/fa3_fwd-0.0.3-*.whl

For each shape it takes the FA3 kernel that FA3's dispatch runs for b1 h16 d128 (no varlen, split, paged KV,
GQA packing or softcap; its tile from tile_size_fwd_sm90) and softbench's A0 cross-compiled for sm_90a, and counts
one steady-state iteration of the key loop per consumer thread (triton_compile.main_loop, the shortest loop
holding a GMMA): FA3's is its unmasked loop; softbench's loop holds both tile forms, so its unmasked path is the
loop less the masked branch it jumps over. Prints a Markdown table. Needs the compiled Triton (not
TRITON_INTERPRET) and c++filt."""

from __future__ import annotations

import collections
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout

from softbench.audit.sass import parse_sass  # noqa: E402
from softbench.kernels.triton_compile import _branch_target, _sass, bundled_tool_dir, main_loop  # noqa: E402

# (name, FA3 element type, FA3 key tile, FA3 cluster size, causal, softbench dtype, softbench label). FA3 builds its
# BF16 non-causal kernel with and without a 2-CTA cluster and chooses at run time: both are listed
SHAPES = (
    ("BF16 causal", "bfloat16_t", 128, 1, True, "bf16", "gluon-n128s2-c240l24-hg8"),
    ("BF16 non-causal", "bfloat16_t", 176, 1, False, "bf16", "gluon-n128s2-c240l24-hg8"),
    ("BF16 non-causal", "bfloat16_t", 176, 2, False, None, None),
    ("FP8 causal", "float_e4m3_t", 224, 1, True, "fp8", "gluon-n128s2-c240l24-hg8-g1"),
)
# each consumer warpgroup's accumulator is 64 rows x N keys over its 128 threads
WG_ROWS, WG_THREADS = 64, 128
COUNTED = ("MUFU.EX2", "FFMA", "FMUL", "FADD", "FMNMX", "F2FP")


def _mix(body) -> dict:
    c = collections.Counter(i.base for i in body)
    mix = {k: c[k] for k in COUNTED[1:]}
    mix["MUFU.EX2"] = sum(1 for i in body if i.opcode.startswith("MUFU.EX2"))
    mix["BAR"] = c["BAR"]
    mix["n"] = len(body)
    return mix


def _minus(a: dict, b: dict) -> dict:
    return {k: a[k] - b.get(k, 0) for k in a}


def fa3_functions(wheel: Path, work: Path) -> list[tuple[Path, str, str]]:
    """(cubin, mangled name, demangled name) of every sm_90 function in the wheel's extension."""
    tools = Path(bundled_tool_dir())
    with zipfile.ZipFile(wheel) as z:
        so = next(n for n in z.namelist() if n.endswith(".so"))
        z.extract(so, work)
    cubins = work / "cubins"
    cubins.mkdir()
    subprocess.run([tools / "cuobjdump", "-xelf", "all", str(work / so)], cwd=cubins, check=True,
                   capture_output=True)
    found = []
    for cubin in sorted(cubins.glob("*sm_90*.cubin")):
        text = subprocess.run([tools / "cuobjdump", "-sass", str(cubin)], capture_output=True, text=True).stdout
        names = re.findall(r"Function : (\S+)", text)
        demangled = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True,
                                   text=True).stdout.splitlines()
        found += [(cubin, m, d) for m, d in zip(names, demangled)]
    return found


def fa3_loop(functions, element: str, block_n: int, cluster: int, causal: bool) -> dict:
    # CollectiveMainloopFwdSm90<Stages, Cluster, TileShape, kHeadDimV, Element, Accum, Arch, Is_causal, Is_local,
    # Has_softcap, Varlen, PagedKVNonTMA, AppendKV, HasQv, MmaPV_is_RS, IntraWGOverlap, PackGQA, Split, V_colmajor>
    want = (f"CollectiveMainloopFwdSm90<2, cute::tuple<cute::C<{cluster}>, cute::C<1>, cute::C<1> >, "
            f"cute::tuple<cute::C<128>, cute::C<{block_n}>, cute::C<128> >, 128, cutlass::{element}, float, "
            f"cutlass::arch::Sm90, {str(causal).lower()}, false, false, false, false, false, false, true, true, "
            "false, false, false>")
    hits = [(c, m) for c, m, d in functions if want in d.split("(flash::enable")[0]]
    if len(hits) != 1:
        raise SystemExit(f"FA3 {element} {block_n} cluster {cluster} causal={causal}: {len(hits)} kernels match, "
                         "expected 1")
    cubin, name = hits[0]
    text = subprocess.run([Path(bundled_tool_dir()) / "cuobjdump", "-sass", "-fun", name, str(cubin)],
                          capture_output=True, text=True).stdout
    return _mix(main_loop(parse_sass(text)[0].instructions))


def softbench_loop(dtype: str, label: str, causal: bool) -> dict:
    from softbench.core.shapes import Shape
    from softbench.kernels.gluon_config import GluonConfig
    from softbench.kernels.triton_compile import compile_kernel

    kernel = compile_kernel(Shape(dtype=dtype, seq=8192, causal=causal, batch=1, heads=16, head_dim=128), "A0",
                            GluonConfig.from_label(label))
    body = main_loop(parse_sass(_sass(kernel.asm["cubin"]))[0].instructions)
    lo, hi = body[0].address, body[-1].address
    # the first forward branch inside the loop jumps over the masked tile form (the longer of the two)
    first = next(i for i in body if i.base == "BRA" and (t := _branch_target(i)) is not None and lo < t <= hi
                 and t > i.address)
    masked = [i for i in body if first.address < i.address < _branch_target(first)]
    path = _minus(_mix(body), _mix(masked))
    path["n"] -= 1  # the branch at the end of the masked form, which the unmasked path never reaches
    return path


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    if bundled_tool_dir() is None or shutil.which("c++filt") is None:
        from softbench.cli import print_error

        return print_error("this needs triton's bundled cuobjdump and c++filt", "run it with the project's "
                           "environment (.venv/bin/python, after make setup) on a machine with binutils", 2)
    with tempfile.TemporaryDirectory() as tmp:
        functions = fa3_functions(Path(argv[0]), Path(tmp))
        print("| kernel, shape | key tile | scores per thread | instructions (unmasked path) | per score | "
              + " / ".join(COUNTED) + " | BAR |")
        print("| --- " * 7 + "|")
        for name, element, block_n, cluster, causal, dtype, label in SHAPES:
            rows = [(f"FA3 (cluster {cluster})", block_n, fa3_loop(functions, element, block_n, cluster, causal))]
            if label:
                rows.append((f"softbench {label}", 128, softbench_loop(dtype, label, causal)))
            for who, tile, mix in rows:
                scores = WG_ROWS * tile // WG_THREADS
                print(f"| {who}, {name} | {tile} | {scores} | {mix['n']} | {mix['n'] / scores:.2f} | "
                      + " / ".join(str(mix[k]) for k in COUNTED) + f" | {mix['BAR']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
