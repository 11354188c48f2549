#!/usr/bin/env python3
"""Where -pt's loss at FP8 causal 8K lies (docs/hopper-notes.md, 2026-12-03): one cold launch under Nsight Compute
showed none for h15-folded (271.8 us under -pt against 271.1 under hg8), the interleaved latency runs 6-7 points,
and only the forms whose calls also run the key-norm kernel lost. This times, back to back in one process, the
Gluon kernel under the hg16 order with and without -pt:
  folded      h15-folded as the backend calls it (key norms, then attention)
  folded-kn0  h15-folded with the key norms left in place from the first call (attention alone; not a product:
              the norms belong to every call, since K changes between calls in use)
  noclamp     h15-noclamp (one kernel per call)
  noclamp+kn  h15-noclamp after the key-norm kernel (two kernels per call, the second not reading the first)
If -pt's loss follows the key-norm kernel (folded and noclamp+kn slow under -pt, folded-kn0 and noclamp not), it
lies between the two launches, not in the attention kernel.

    python3 tools/gpu/pt_norms_probe.py OUTDIR      (from the repository root, on the GPU host)

Same timing as triton_probe (10 warm-up calls, then the median of windows of 20 calls, CUDA events), each mode's
two configurations measured alternately three times. A screening probe, not a session. Writes
OUTDIR/pt_norms_probe.json."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tools/gpu: triton_probe's timing

import torch  # noqa: E402

from softbench.core.shapes import Shape  # noqa: E402
from softbench.kernels import gluon_attn as ga  # noqa: E402
from softbench.kernels.gluon_config import GluonConfig  # noqa: E402
from softbench.kernels.inputs import make_inputs  # noqa: E402
from triton_probe import time_forward  # noqa: E402

LABELS = {"hg16": "gluon-n128s2-c240l24-hg16-rla-lmt-tb", "pt": "gluon-n128s2-c240l24-hg16-pt-rla-lmt-tb"}


def forwards(ops: dict) -> dict:
    """Each mode's call, per configuration."""
    real_norms = ga.launch_key_norms

    def no_norms(k, kn):  # the norms already in kn stay valid: K does not change here
        return None

    def call(config, variant, norms, extra_norms=False):
        o = ops[config]
        cfg = GluonConfig.from_label(LABELS[config])

        def forward():
            if extra_norms:
                real_norms(o.k, o.kn)
            ga.launch_key_norms = real_norms if norms else no_norms
            try:
                ga.launch(o, True, variant, cfg)
            finally:
                ga.launch_key_norms = real_norms
        return forward

    return {mode: {c: call(c, *spec) for c in LABELS} for mode, spec in {
        "folded": ("h15-folded", True), "folded-kn0": ("h15-folded", False),
        "noclamp": ("h15-noclamp", True), "noclamp+kn": ("h15-noclamp", True, True)}.items()}


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    shape = Shape(dtype="fp8", seq=8192, causal=True, head_dim=128)
    inputs = make_inputs(shape, 0, "cuda")
    ops = {c: ga.prepare_operands(inputs.q, inputs.k, inputs.v, GluonConfig.from_label(label))
           for c, label in LABELS.items()}
    rows = []
    with torch.inference_mode():
        for mode, per_config in forwards(ops).items():
            times = {c: [] for c in per_config}
            for _ in range(3):
                for c, forward in per_config.items():
                    times[c].append(time_forward(forward))
            row = {"mode": mode, **{f"{c}_ms": statistics.median(t) for c, t in times.items()}}
            row["pt_over_hg16"] = row["pt_ms"] / row["hg16_ms"]
            rows.append(row)
            print(json.dumps(row), flush=True)
            (out / "pt_norms_probe.json").write_text(json.dumps(
                {"meta": {"device": torch.cuda.get_device_name(), "shape": shape.tag(), "labels": LABELS,
                          "kind": "screening probe, not a session"}, "rows": rows}, indent=1))


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):  # --help is not an OUTDIR to make
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
