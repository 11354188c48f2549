"""The report's tables, one per session kind: rows for the terminal and report.md."""

from __future__ import annotations

import math
from dataclasses import dataclass

from softbench.core.numbers import finite, is_real
from softbench.core.shapes import seq_label
from softbench.core.stats import population_sd
from softbench.core.tables import NO_INTERVAL, fmt, fmt_estimate, fmt_interval
from softbench.latency.exactness import exactness_warning, recorded_exactness
from softbench.predictions.sessions import SessionRecord
from softbench.report.nulls import NOT_MEASURED, null_absent, session_null
from softbench.report.records import (fidelity_conditions, fidelity_reference, first_variant, loop_entries, marked_name,
                                      mask_label, trace_points, traced_point)
from softbench.report.reestimate import EstimateAgainst, against_reference
from softbench.report.speed_figure import against_name, configuration, point_name
from softbench.report.speed_fidelity import SpeedFidelity
from softbench.report.speedups import PAPER, QUANTITY_NAMES, session_quantity
from softbench.trace.summary import CLOCK_DRIFT_PCT, kernels_beside


@dataclass
class TableData:
    title: str
    columns: list[str]
    rows: list[list[str]]
    # the columns that carry the result: all that a console too narrow for the whole table shows
    # (softbench.report.console_view); report.md always has every column
    narrow: tuple[str, ...] = ()
    # what the columns mean where a heading cannot say it: a paragraph under the table in report.md
    caption: str = ""


def _latency_estimate(estimate, ci) -> str:
    """A latency session's estimate with its interval; a session too short for an interval says so in the cell,
    since a bare number there would read as a resolved one."""
    return fmt_estimate(estimate, ci, no_interval=NO_INTERVAL)


def _recorded_pair(paired: dict | None) -> str | None:
    """A comparison's recorded paired estimate as a cell; None where it has no estimate."""
    if not paired or paired.get("estimate_pct") is None:
        return None
    return _latency_estimate(paired["estimate_pct"], paired.get("ci95_pct"))


def _paired_cell(paired: dict | None) -> str:
    return _recorded_pair(paired) or f"{NOT_MEASURED} (no pairs)"


def _further_variants(rec: SessionRecord) -> list[str]:
    """A paired session's variants after its first (sweep variants times several in one run), by label."""
    s = rec.summary
    if session_quantity(rec) == PAPER:
        return []
    return [label for label, c in (s.get("comparisons") or {}).items()
            if c.get("role") == "variant" and label != s.get("variant")]


def _per_round(rec: SessionRecord) -> list[float]:
    """Each round's speed-up of the first variant: the paper rounds' own list, or a paired run's per-round
    estimates where it ran rounds."""
    s = rec.summary
    if s.get("per_round_speedup_pct"):
        values = list(s["per_round_speedup_pct"])
    else:
        rounds = ((s.get("comparisons") or {}).get(s.get("variant")) or {}).get("per_round") or []
        values = [r.get("estimate_pct") for r in rounds if isinstance(r, dict)]
    # a round the session could not estimate (None; NaN from too few pairs) is no value to list or spread
    return [x for x in map(finite, values) if x is not None]


def _round_sd(rec: SessionRecord) -> str:
    """The sd between rounds (population sd, as the paper rounds record it) of the rounds _per_round lists; '-'
    below two rounds, where a recorded 0.0 is no measurement of spread."""
    rounds = _per_round(rec)
    return f"{population_sd(rounds):.2f}" if len(rounds) > 1 else "-"


def _round_cell(rec: SessionRecord) -> str:
    text = ", ".join(f"{x:+.2f}" for x in _per_round(rec)) or "-"
    return f"{first_variant(rec)}: {text}" if _further_variants(rec) and text != "-" else text


def _speedup_cell(rec: SessionRecord) -> str:
    """The session's speed-up of its first variant with its 95% interval, then its further variants' (each by
    label): the paired estimate for the paired protocols; for the paper rounds, the pooled medians with the window
    bootstrap they wrote, named as such."""
    s = rec.summary
    # a baseline that is not exact attention qualifies every speed-up of its run: said in the cell itself
    warning = exactness_warning(recorded_exactness(s))
    if session_quantity(rec) != PAPER:
        cell = _latency_estimate(s.get("speedup_pct"), s.get("speedup_ci95_pct"))
    else:
        cell = _latency_estimate(s.get("speedup_pct"), s.get("bootstrap_ci95_pct"))
        cell = cell if s.get("speedup_pct") is None else f"{cell} (pooled medians, window bootstrap)"
    comps, further = s.get("comparisons") or {}, _further_variants(rec)
    if further:  # several variants: each value named
        cell = f"{first_variant(rec)} {cell}" + "".join(f"; {label} {_paired_cell(comps[label].get('paired'))}"
                                                         for label in further)
    return f"{cell}; {warning}" if warning else cell


def _null_cell(rec: SessionRecord) -> str:
    """The session's own A/A null against its baseline, or why there is none."""
    null = session_null(rec)
    paired = ((rec.summary.get("comparisons") or {}).get(null) or {}).get("paired") if null else None
    return _recorded_pair(paired) or null_absent(rec)


def _reference_cell(rec: SessionRecord, estimate: EstimateAgainst) -> str:
    """The variant against each reference kernel timed in the same run (FA3: ref-fa3), per pair, re-estimated
    from the session's own units (softbench.report.reestimate), as docs/leases.md's rows give it."""
    variant, further = rec.summary.get("variant"), _further_variants(rec)
    cells = []
    for ref in rec.summary.get("references") or []:
        estimates, why = estimate(rec, ref)
        if why:
            text = f"not estimated: {why}"
        elif further:  # several variants: each named
            text = ", ".join(f"{label} {_paired_cell(estimates.get(label))}" for label in (variant, *further))
        else:
            text = _paired_cell(estimates.get(variant))
        cells.append(f"{against_name(ref)}: {text}")
    return "; ".join(cells) or "not timed"


def latency_table(recs: list[SessionRecord], estimate: EstimateAgainst = against_reference) -> TableData:
    rows = []
    for r in recs:
        s, f = r.summary, r.facts
        quantity = session_quantity(r)
        rows.append([marked_name(r), str(f.get("backend", "-")), str(f.get("dtype", "-")),
                     seq_label(f["seq"]) if isinstance(f.get("seq"), int) else "-", mask_label(f.get("causal")),
                     f"{f.get('baseline', '?')} vs {', '.join([first_variant(r), *_further_variants(r)])}",
                     QUANTITY_NAMES.get(quantity, quantity),
                     _speedup_cell(r), _null_cell(r), _reference_cell(r, estimate),
                     _round_sd(r), _round_cell(r),
                     # a run stopped before it timed a kernel records its median as None
                     ", ".join(f"{k} {fmt(v, '.4f')}" for k, v in (s.get("median_ms") or {}).items()) or "-"])
    return TableData("latency sessions", ["session", "backend", "dtype", "seq", "mask", "comparison", "quantity",
                                          "speed-up % [95% interval]", "A/A null % [95% interval]",
                                          "variant vs reference % [95% interval]", "per-round sd pp",
                                          "per-round %", "median ms"], rows,
                     narrow=("session", "dtype", "seq", "mask", "comparison", "quantity", "speed-up % [95% interval]",
                             "A/A null % [95% interval]", "variant vs reference % [95% interval]"))


def _numeric_leaves(d: dict, prefix: str = "", depth: int = 2) -> dict[str, float]:
    out: dict[str, float] = {}
    for k, v in d.items():
        if isinstance(v, dict) and depth > 1:
            out.update(_numeric_leaves(v, f"{prefix}{k}.", depth - 1))
        elif is_real(v):
            out[f"{prefix}{k}"] = v
    return out


def _rank(key: str) -> tuple:
    # energy per forward first, then what explains it (time, power, clock), then the rest
    order = ("per_forward", "mean_power_w", "sm_clock", "forwards")
    return (next((i for i, o in enumerate(order) if o in key), len(order)), key)


def energy_table(recs: list[SessionRecord], max_fields: int = 8) -> TableData:
    rows = []
    for r in recs:
        entries = loop_entries(r.summary)
        if not entries:
            rows.append([marked_name(r), "-", "no per-loop entries in summary.json"])
        for name, x in entries:
            leaves = _numeric_leaves(x)
            keys = sorted(leaves, key=_rank)[:max_fields]
            rows.append([marked_name(r), name, ", ".join(f"{k} {fmt(leaves[k], '.4g')}" for k in keys) or "-"])
    return TableData("energy sessions", ["session", "loop", "numbers (summary.json)"], rows,
                     narrow=("session", "loop", "numbers (summary.json)"))


def fidelity_table(recs: list[SessionRecord]) -> TableData:
    rows = []
    for r in recs:
        for name, c in fidelity_conditions(r.summary):
            resolved = c["ci_low"] > 0 or c["ci_high"] < 0
            rows.append([marked_name(r), name, fidelity_reference(r.summary), str(r.summary.get("dtype", "-")),
                         fmt(c["dnll"], "+.5f"), f"[{c['ci_low']:+.5f}, {c['ci_high']:+.5f}]",
                         fmt(100 * (math.exp(c["dnll"]) - 1), "+.3f"), "yes" if resolved else "no"])
    return TableData("fidelity sessions", ["session", "condition", "dNLL against", "dtype", "dNLL", "95% interval",
                                           "ppl change %", "resolved"], rows,
                     narrow=("session", "condition", "dNLL against", "dNLL", "95% interval", "resolved"))


def trace_table(recs: list[SessionRecord]) -> TableData:
    rows = []
    for r in recs:
        for p in trace_points(r):
            base, var = p.get("baseline", "A0"), p.get("variant", "A1")
            k, c, nk = p.get("kernel_us") or {}, p.get("call_latency_us") or {}, p.get("non_kernel_pct") or {}
            rows.append([marked_name(r), str(r.summary.get("source", "-")), seq_label(p["seq"]), mask_label(p.get("causal")),
                         f"{base} vs {var}",
                         f"{fmt(k.get(base), '.1f')} / {fmt(k.get(var), '.1f')}",
                         f"{fmt(c.get(base), '.1f')} / {fmt(c.get(var), '.1f')}",
                         fmt(p.get("kernel_only_speedup_pct"), "+.1f"),
                         fmt(p.get("kernel_only_speedup_timed_pct"), "+.1f"),
                         fmt(p.get("call_latency_speedup_pct"), "+.1f"),
                         f"{fmt(nk.get(base), '.1f')} / {fmt(nk.get(var), '.1f')}",
                         *_trace_point_checks(r, p, base, var)])
    # a trace's processes run one after another from an idle board: neither at equal clock nor sustained (its
    # summary says so, and names a point whose clock moved inside its window)
    return TableData("trace sessions (kernel duration against call latency; one process after another, no null)",
                     ["session", "source", "seq", "mask", "comparison", "kernel us", "call us", "kernel-only %",
                      "timed only %", "call %", "non-kernel %", "halves moved %", "other kernels %"], rows,
                     narrow=("session", "seq", "mask", "comparison", "kernel-only %", "call %"),
                     caption=TRACE_CAPTION)


TRACE_CAPTION = (
    "A cell of two figures reads baseline / variant. Kernel-only % compares the attention kernel's median over all "
    "traced calls, timed only % over the timed calls alone, call % the host's time per call. Halves moved % is how "
    "far each kernel's median moved from the first half of its timed calls to the second: beyond "
    f"{CLOCK_DRIFT_PCT:g}% the clock moved inside the window ('-': recorded before the check). Other kernels % is "
    "the share of each process's GPU time taken by kernels beside the attention kernel (such as the key norms of "
    "the proof-carrying forms), which the kernel-only columns leave out and the call latency includes.")


def _trace_point_checks(rec: SessionRecord, row: dict, base: str, var: str) -> list[str]:
    """Two checks of a B4 row's points, baseline / variant: how far each kernel's median moved between the halves of
    its timed calls (a clock that moved inside the window; '-' where the session predates the check), and the
    share of GPU time taken by kernels beside the attention kernel, which the kernel-only columns leave out."""
    pts = [traced_point(rec, row["seq"], row.get("causal"), name) for name in (base, var)]
    moved = [fmt((p.get("kernel_timed_halves_us") or {}).get("change_pct"), "+.1f") for p in pts]
    beside = []
    for p in pts:
        kernels = [(k.get("name"), k.get("total_ns") or 0.0) for k in p.get("kernels") or [] if isinstance(k, dict)]
        shares = kernels_beside(kernels, p.get("kernel_name")) if kernels else None
        beside.append("-" if shares is None else fmt(sum(pct for _, pct in shares), ".1f"))
    return [" / ".join(moved), " / ".join(beside)]


def speed_fidelity_table(sf: SpeedFidelity) -> TableData:
    """The joined points of the speed-against-fidelity figure, numbered as the figure numbers them."""
    rows = []
    for i, p in enumerate(sf.points):
        s, f = p.speed, p.fidelity
        ran = f" (ran {f.variant})" if f.variant and f.variant != s.variant else ""
        rows.append([str(i + 1), point_name(p), s.board or "-", configuration(s) or "-", s.backend, s.quantity,
                     against_name(s.against),
                     fmt(s.estimate_pct, "+.2f"), fmt_interval((s.ci_low, s.ci_high)),
                     s.session + ("" if s.complete else " (partial)"), p.operator, f.condition + ran,
                     f.reference, fmt(f.dnll, "+.5f"), fmt_interval((f.ci_low, f.ci_high), "+.5f"),
                     f"{f.session}{'' if f.complete else ' (partial)'}: {f.model}, {f.corpus}, {f.dtype}"])
    return TableData(f"speed against fidelity at {sf.shape_tag}",
                     ["#", "kernel", "GPU", "configuration", "backend", "quantity", "against", "speed-up %",
                      "95% interval", "latency session", "operator", "fidelity condition", "dNLL against", "dNLL",
                      "dNLL 95% interval", "fidelity session"], rows,
                     narrow=("#", "kernel", "quantity", "against", "speed-up %", "95% interval", "operator", "dNLL",
                             "dNLL 95% interval"))
