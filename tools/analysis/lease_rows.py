#!/usr/bin/env python3
"""docs/leases.md's per-lease table rows, read from the latency sessions themselves (no GPU).

    python tools/analysis/lease_rows.py sessions/<latency session> [more sessions] [--reference ref-fa3]

One markdown row per session that timed the reference kernel in the same run: the shape, the baseline's kernel
configuration as its worker reported it (and the variant's, beside its figure, where it ran in another), the time budget (or the sustained protocol's blocks) and processes per
kernel, A0 against the reference by the two kernels' median ms per call, then per pair
(softbench.report.reestimate: the session's own units and estimator) A0 and the variant against the reference, and
the session's A/A null. A session that cannot give these says why on stderr and gets no row, so nothing in a row
is typed by hand."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout

from softbench.core.shapes import mask_words  # noqa: E402
from softbench.core.tables import fmt_estimate  # noqa: E402
from softbench.predictions.sessions import load_session  # noqa: E402
from softbench.report.records import kernel_config, variant_config  # noqa: E402
from softbench.report.reestimate import against_reference  # noqa: E402

HEADER = ("| shape | configuration | budget | A0 / FA3 (medians) | A0 against FA3, per pair | "
          "variant against FA3, per pair | A/A null | session |\n| --- | --- | --- | --- | --- | --- | --- | --- |")


def pct(est: dict | None) -> str:
    """+0.21% [-0.30, +0.53]: a paired estimate and its 95% interval, as the session's tables print them."""
    if not est:
        return "n/a"
    # without an interval (too few pairs: NaN bounds, or none recorded) the estimate stands alone
    return fmt_estimate(est.get("estimate_pct"), est.get("ci95_pct"), unit="%", missing="n/a")


def protocol_budget(protocol: dict) -> str:
    """How long the session timed: '30 s' for the interleaved protocol's budget (equal clock); the sustained
    protocol, which times each kernel in blocks of its own at the power cap, says so with its blocks."""
    if protocol.get("kind") == "sustained":
        return f"sustained, {protocol['cycles']} cycles of {protocol['measure_s']:g} s blocks"
    return f"{protocol['budget_s']:g} s"


def row(path: Path, reference: str) -> str:
    """The session's row; raises ValueError with one sentence where it has none."""
    rec = load_session(path)
    s, f = rec.summary, rec.facts
    if reference not in (s.get("kernels") or {}):
        raise ValueError(f"{rec.name} did not time {reference}")
    estimates, why = against_reference(rec, reference)
    if why:
        raise ValueError(f"{rec.name}: {why}")
    base, variant = s["baseline"], s.get("variant")
    medians = s["kernels"]
    ratio = medians[reference]["median_ms"] / medians[base]["median_ms"]  # > 1: A0 the faster
    shape = f"{str(f['dtype']).upper()} {mask_words(f['causal'])} {int(f['seq']) // 1024}K"
    budget = protocol_budget(s["protocol"])
    if (f.get("processes_per_kernel") or 1) > 1:
        budget += f", {f['processes_per_kernel']} processes per kernel"
    null = (s.get("comparisons") or {}).get(f"{base}'", {}).get("paired")
    own = variant_config(rec)  # --variant-config: the variant's row names where it ran, or it reads as the baseline's
    named = f"{variant} under `{own}`" if own else variant
    return (f"| {shape} | `{kernel_config(rec) or '?'}` | {budget} | {ratio:.3f} | {pct(estimates.get(base))} | "
            f"{named}: {pct(estimates.get(variant))} | {pct(null)} | `{rec.name.split('-')[0]}` |")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sessions", nargs="+", type=Path, help="latency session folders")
    ap.add_argument("--reference", default="ref-fa3", help="the reference kernel's label (default: ref-fa3)")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:  # a usage error: argparse has said why; the code is returned, as for a failed row
        return int(e.code or 0)
    rows, failed = [], 0
    for name in args.sessions:
        try:
            rows.append(row(name, args.reference))
        except (ValueError, KeyError, TypeError, OSError) as e:
            print(f"{name}: no row ({e})", file=sys.stderr)
            failed += 1
    print("\n".join([HEADER, *rows]))
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
