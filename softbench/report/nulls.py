"""The A/A nulls of many latency sessions side by side: does the baseline's process carry an offset?

A null is one run's check on itself; a bias shows only across runs. On the H200 (2026-12-01) 5 of 14
interleavings of four or more kernels read a null that excludes 0, all positive, while runs of two processes
did not. This table puts every recorded null beside what might explain it: the protocol, how many kernels shared
the run, and the order in which their processes started (env.json's `start_order`, recorded since then; older
sessions started them as listed: baseline, variants, null, references). The summary line counts misses and signs
over the sessions given, so a run of `--start-order shuffled` sessions answers whether the offset follows the
role or the place."""

from __future__ import annotations

from dataclasses import dataclass

from softbench.core.tables import fmt
from softbench.predictions.sessions import SessionRecord
from softbench.report.records import marked_name


@dataclass(frozen=True)
class NullRow:
    session: str
    protocol: str
    dtype: str
    kernels: int
    start_order: str  # "listed", "shuffled: A0', ref-fa3, A0, h15-sat", "listed (not recorded)"
    null_first: bool | None  # whether the null's process started before the baseline's; None: unknown
    estimate_pct: float
    ci: tuple[float, float] | None

    @property
    def covers_zero(self) -> bool | None:
        return None if self.ci is None else self.ci[0] <= 0.0 <= self.ci[1]


def null_rows(recs: list[SessionRecord]) -> list[NullRow]:
    """One row per latency session whose summary names a null (interleaved or sustained)."""
    rows = []
    for r in recs:
        s = r.summary or {}
        null = s.get("null")
        comp = (s.get("comparisons") or {}).get(null) if isinstance(null, str) else None
        paired = (comp or {}).get("paired") or {}
        if paired.get("estimate_pct") is None:
            continue
        kernels = list(s.get("kernels") or {})
        baseline = s.get("baseline") or (kernels[0] if kernels else None)
        order = r.env.get("start_order") if isinstance(r.env.get("start_order"), dict) else None
        if order is None or order.get("rule") == "listed":
            # listed: the baseline's process starts first, by construction (LatencyOptions.kernel_specs)
            text = "listed" if order else "listed (not recorded)"
            null_first: bool | None = False
        else:
            listed = order.get("labels") or []
            text = f"{order.get('rule', '?')}: {', '.join(listed)}"
            null_first = listed.index(null) < listed.index(baseline) if null in listed and baseline in listed else None
        ci = paired.get("ci95_pct")
        rows.append(NullRow(marked_name(r), str(s.get("protocol_kind") or r.facts.get("protocol") or "-"),
                            str(r.facts.get("dtype", "-")), len(kernels), text, null_first,
                            float(paired["estimate_pct"]), (float(ci[0]), float(ci[1])) if ci else None))
    return rows


NULL_COLUMNS = ["session", "protocol", "dtype", "kernels", "start order", "null first", "A/A null %", "95% CI",
                "covers 0"]


def null_table_rows(rows: list[NullRow]) -> list[list[str]]:
    def yn(v):
        return "-" if v is None else ("yes" if v else "no")

    return [[r.session, r.protocol, r.dtype, str(r.kernels), r.start_order, yn(r.null_first),
             fmt(r.estimate_pct, "+.2f"), f"[{r.ci[0]:+.2f}, {r.ci[1]:+.2f}]" if r.ci else "-", yn(r.covers_zero)]
            for r in rows]


def null_summary(rows: list[NullRow]) -> list[str]:
    """Per group of runs (two kernels, four or more; null started first or not), how many nulls miss 0, with
    which sign, and their mean: sentences for report.md."""
    groups: dict[str, list[NullRow]] = {}
    for r in rows:
        size = "two kernels" if r.kernels <= 2 else f"{'three' if r.kernels == 3 else 'four or more'} kernels"
        place = {True: ", null started first", False: ", baseline started first", None: ""}[r.null_first]
        groups.setdefault(f"{r.protocol}, {size}{place}", []).append(r)
    out = []
    for name, g in sorted(groups.items()):
        misses = [r for r in g if r.covers_zero is False]
        pos = sum(r.estimate_pct > 0 for r in g)
        mean = sum(r.estimate_pct for r in g) / len(g)
        out.append(f"- {name}: {len(g)} null(s), mean {mean:+.2f} pp, {pos} positive; misses of 0: {len(misses)}"
                   + (f" ({', '.join(f'{r.estimate_pct:+.2f}' for r in misses)})" if misses else ""))
    return out
