#!/usr/bin/env python3
"""Where the dynamic schedule's outputs leave the one-block kernel's at FP8 with two consumers (GPU host).

    python3 tools/gpu/pd_diagnose.py OUTDIR [--probe-data]

On the H200 (2026-12-04, sessions/gluon-probe-h200-20261204-0540-dynamic-fp8) A0 under
gluon-n128s2-c240l24-hg2-pd-rla-ro-lmt-tb differed from plain()'s output (the one-block kernel without -ro and -tb)
at (1, 2048, 8 heads, causal) and at 8K; gluon_attn refused -pd at FP8 with two consumers from 06:10 to 07:35
(this script lifted the refusal for itself then). For the failing configuration and forms of it with one option
changed (-mlf, no -tb, no -ro, per-thread row sums instead of -lmt, one consumer), at each shape:
- the one-block kernel twice (is the reference itself repeatable?);
- the dynamic schedule three times into an output filled with NaN before each launch (rows never written stay NaN;
  a race shows as launches that differ from each other);
- which query blocks and which consumer's rows (the first or second 64 of a block) differ from the one-block kernel,
  and by how much (differing_blocks).
Writes OUTDIR/pd_diagnose.json and prints one JSON line per row. A screening probe, not a session.

On the H200 (2026-12-04 07:06, sessions/gluon-probe-h200-20261204-0706-pd-diagnose) every form above was bit-equal to
its one-block kernel, in every launch, on this script's inputs. The probe of 05:40 compared -pd with plain() (no -ro,
no -tb) on gluon_probe's inputs. --probe-data repeats that: gluon_probe's checks at the two shapes that failed (its
draws for them depend on which shapes a run selects, so not the very same inputs) and its repeated runs at 8K (the
very same inputs: a fixed seed), for FAILING and for its one-block form side by side, each against plain(). If the one-block form also differs from plain() there, -ro (not -pd) is what changes bits; if only the
dynamic form does, -pd is at fault on those inputs. Writes OUTDIR/pd_diagnose_probe_data.json.

Found (07:23, sessions/gluon-probe-h200-20261204-0723-pd-diagnose-probe-data): the one-block form differed from
plain() exactly where the dynamic one did. The cause was -ro's: the per-tile row sums' (-lmt) deferred rescale was
fused with the next add into an FFMA; gluon_attn._key_tile rescales them at the tile's end since."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout

import torch  # noqa: E402

FAILING = "gluon-n128s2-c240l24-hg2-pd-rla-ro-lmt-tb"
# one option changed at a time from FAILING (and the FP8 default's form, which passed, as the control)
FORMS = (FAILING, "gluon-n128s2-c240l24-hg2-pd-rla-ro-lmt-tb-mlf", "gluon-n128s2-c240l24-hg2-pd-rla-ro-lmt",
         "gluon-n128s2-c240l24-hg2-pd-rla-lmt-tb", "gluon-n128s2-c240l24-hg2-pd-rla-ro-ltt-tb",
         "gluon-n128s2-c240l24-hg2-g1-pd-rla-ro-lmt-tb", "gluon-n128s2-c240l24-hg8-g1-pd-rla-lmt-tb-mlf")
SHAPES = ((1, 2048, 8, 8, 128, True), (1, 8192, 16, 16, 128, True), (1, 8192, 16, 16, 128, False))
LAUNCHES = 3


def differing_blocks(out: torch.Tensor, ref: torch.Tensor, block_m: int = 128, rows_per_consumer: int = 64) -> dict:
    """Where out (batch, seq, heads, dim) differs from ref: the count of differing elements, of NaN rows in out, and
    per differing (batch, head, query block) which consumer's rows (0: the block's first rows_per_consumer rows,
    1: the rest) differ, with the largest absolute difference; at most 16 blocks listed, the largest first."""
    out, ref = out.float().cpu(), ref.float().cpu()
    nan_rows = torch.isnan(out).any(dim=-1)  # (b, s, h)
    differ = (out != ref) & ~torch.isnan(out)
    diff = (out - ref).abs().nan_to_num(0.0).amax(dim=-1)  # (b, s, h)
    row_differs = differ.any(dim=-1)
    blocks = []
    b_n, s_n, h_n = row_differs.shape
    for b in range(b_n):
        for h in range(h_n):
            for m0 in range(0, s_n, block_m):
                rows = row_differs[b, m0:m0 + block_m, h]
                if not rows.any():
                    continue
                halves = sorted({int(i) // rows_per_consumer for i in torch.nonzero(rows).flatten()})
                blocks.append({"batch": b, "head": h, "block": m0 // block_m, "consumers": halves,
                               "rows": int(rows.sum()), "max_abs": float(diff[b, m0:m0 + block_m, h].max())})
    blocks.sort(key=lambda x: -x["max_abs"])
    return {"elements_differing": int(differ.sum()), "nan_rows": int(nan_rows.sum()),
            "blocks_differing": len(blocks), "largest": blocks[:16]}


PROBE_SHAPES = {4, 6}  # gluon_probe's CHECK_SHAPES (1, 2048, 8, 8, 128, causal) and (2, 4000, 16, 8, 128, causal)


def probe_data(out_dir: Path) -> int:
    """FAILING and its one-block form through gluon_probe's own checks and repeated runs (its inputs, its seeds,
    each output against plain())."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # tools/gpu: gluon_probe
    import gluon_probe as gp

    from softbench.kernels.gluon_config import GluonConfig

    failing = GluonConfig.from_label(FAILING)
    configs = (failing, replace(failing, schedule="blocks"))
    rows: list = []
    fp8 = {"fp8": torch.float8_e4m3fn}
    gp.checks(rows, fp8, configs, ("A0", "h15-folded"), PROBE_SHAPES)
    gp.repeated_equality(rows, fp8, configs, ("A0", "h15-folded"), LAUNCHES)
    (out_dir / "pd_diagnose_probe_data.json").write_text(json.dumps(
        {"kind": "screening probe, not a session", "device": torch.cuda.get_device_name(), "rows": rows}, indent=1))
    return 0


def main(argv: list[str]) -> int:
    args = [a for a in argv if a != "--probe-data"]
    if len(args) != 1:
        print(__doc__)
        return 2
    from softbench.kernels import gluon_attn as ga
    from softbench.kernels.gluon_config import GluonConfig

    out_dir = Path(args[0])
    out_dir.mkdir(parents=True, exist_ok=True)
    if "--probe-data" in argv:
        return probe_data(out_dir)
    rows = []
    g = torch.Generator().manual_seed(11)
    for (b, s, h, hk, d, causal) in SHAPES:
        q, k, v = (torch.randn(b, s, n, d, generator=g).to(torch.float8_e4m3fn).cuda() for n in (h, hk, hk))
        for label in FORMS:
            config = GluonConfig.from_label(label)
            plain = replace(config, schedule="blocks")
            row = {"shape": [b, s, h, hk, d, causal], "config": label, "variant": "A0"}
            try:
                ref = ga.attention(q, k, v, causal, "A0", plain).clone()
                row["reference_repeats"] = bool(torch.equal(ga.attention(q, k, v, causal, "A0", plain), ref))
                ops = ga.prepare_operands(q, k, v, config)
                outs = []
                for _ in range(LAUNCHES):
                    ops.out.fill_(float("nan"))
                    outs.append(ga.launch(ops, causal, "A0", config).clone())
                row["launches_agree"] = all(torch.equal(o, outs[0]) for o in outs[1:])
                row["counter_after"] = int(ops.counter.item())
                row["per_launch"] = [differing_blocks(o, ref, 64 * config.consumers) for o in outs]
                row["ok"] = all(x["elements_differing"] == 0 and x["nan_rows"] == 0 for x in row["per_launch"])
            except Exception as e:  # one form failing to compile or run is itself a finding
                row.update(error=f"{type(e).__name__}: {str(e).strip()[:400]}", ok=False)
            rows.append(row)
            print(json.dumps(row), flush=True)
    (out_dir / "pd_diagnose.json").write_text(json.dumps({"kind": "screening probe, not a session",
                                                          "device": torch.cuda.get_device_name(), "rows": rows},
                                                         indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
