"""`softbench gates`' printers: summary.json -> the gates table, headline and summary.md (they read results, never
measure)."""

from __future__ import annotations

import math

from softbench.core.tables import md_heading, md_table
from softbench.gates.tolerances import ENVELOPE


def _num(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, int):
        return str(v)
    return f"{v:.4g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.3e}"


def verdict(passed: bool | None) -> str:
    return {True: "pass", False: "FAIL", None: "n/a"}[passed]


GATE_COLUMNS = ["gate", "observed", "bound", "unit", "result", "notes"]


def gate_rows(summary: dict) -> list[list[str]]:
    rows = []
    for name, g in summary.get("gates", {}).items():
        lo, hi = g["value"]
        observed = _num(lo) if lo == hi else f"[{_num(lo)}, {_num(hi)}]"
        notes = []
        if "mean" in g:
            notes.append(f"mean {_num(g['mean'])}")
        for key, text in (("fraction_outside_before_tolerance", "outside envelope"),
                          ("fraction_below_before_tolerance", "below"), ("fraction_above_before_tolerance", "above")):
            if g.get(key) is not None:
                notes.append(f"{text} {100 * g[key]:.3f}%")
        if "shift_min" in g:
            notes.append(f"shift [{_num(g['shift_min'])}, {_num(g['shift_max'])}]")
        if "lattice_ties_max" in g:
            notes.append(f"ties median {_num(g['lattice_ties_median'])}, max {_num(g['lattice_ties_max'])}")
        if g.get("ambiguous_elements"):
            notes.append(f"{g['ambiguous_elements']} near a rounding boundary")
        # sessions recorded before 2026-12-02 named the count ambiguous_rows (single tile) or phase_open_rows
        open_rows = g.get("open_anchor_rows") or g.get("ambiguous_rows") or g.get("phase_open_rows")
        if open_rows:
            notes.append(f"{open_rows} rows whose anchor is open")
        if g.get("rows_one_step_allowed"):
            notes.append(f"{g['rows_one_step_allowed']} rows allowed one step (anchor open)")
        if "phase_half_min" in g:
            notes.append(f"row phase/2 [{_num(g['phase_half_min'])}, {_num(g['phase_half_max'])}] taken off")
        if "not_applicable" in g:
            notes.append(g["not_applicable"])
        unit = {"octave": "oct"}.get(g.get("unit", ""), g.get("unit", ""))
        rows.append([name, observed, f"[{_num(g['bound'][0])}, {_num(g['bound'][1])}]", unit,
                     verdict(g["passed"]), "; ".join(notes)])
    return rows


def _reference_name(summary: dict) -> str:
    return (summary.get("reference") or {}).get("name", "rowmax-h15")  # older sessions: always Rowmax-H15


def gates_headline(summary: dict) -> str:
    if not summary.get("complete"):
        return f"gates not finished: {summary.get('incomplete_reason', 'interrupted')}"
    against = f"reference {_reference_name(summary)}"
    if summary["all_passed"]:
        return (f"all gates passed ({summary['variant']} against {summary['baseline']}, {summary['backend']}; "
                f"{against})")
    return f"FAILED gates: {', '.join(summary['failed'])} ({summary['variant']}, {summary['backend']}; {against})"


def gates_markdown(summary: dict, title: str) -> str:
    lines = md_heading(title, summary)
    ref = summary.get("reference") or {}
    lines += [f"- backend: `{summary.get('backend')}`; {summary.get('variant')} against {summary.get('baseline')}",
              f"- reference weight map: `{_reference_name(summary)}`"
              + (f": {ref['description']}" if ref.get("description") else "")
              + (f" ({summary['reference_note']})" if summary.get("reference_note") else ""),
              f"- shapes: {summary.get('shapes', {})}", f"- storage: {summary.get('storage', {})}",
              f"- rescale threshold tau: {summary.get('rescale_threshold')}", "", gates_headline(summary), ""]
    lines += md_table(GATE_COLUMNS, gate_rows(summary))
    a, b = ENVELOPE
    lines += ["", f"Envelope of Rowmax-H15's octave error: [{a:g}, {b:.5f}] (paper B.1); the normalized ratio may "
              f"span [a - b, b - a]. Each bound adds the storage rounding the compared readings went through "
              f"(gates.json lists each tolerance). The gates are checks, not a proof, and do not replace model-level "
              f"NLL.", ""]
    return "\n".join(lines)


def gates_table(title: str, rows: list[list[str]]):
    """The gates as a table; each gate's notes follow it as lines, so the numbers fit a narrow terminal."""
    from rich.table import Table

    t = Table(title=title)
    for name in ("gate", "observed", "bound", "unit", "result"):
        t.add_column(name, no_wrap=True)
    for r in rows:
        t.add_row(*r[:5], style="red" if r[4] == "FAIL" else None)
    return t


def print_gates(session, summary) -> None:
    """The gates table and headline; a failed gate ends the command with GatesFailed (exit 1)."""
    from softbench.core.console import err, out
    from softbench.gates.engine import GatesFailed

    rows = gate_rows(summary)
    out.print(gates_table(f"correctness gates: {summary['tag']}", rows))
    for r in rows:
        if r[5]:
            out.print(f"  {r[0]}: {r[5]}", highlight=False)
    if summary.get("reference_note"):
        out.print(f"note: {summary['reference_note']}", highlight=False)
    out.print(gates_headline(summary))
    err.print(f"session: {session.path}")
    if not summary["all_passed"]:
        raise GatesFailed(f"{len(summary['failed'])} gate(s) failed: {', '.join(summary['failed'])}",
                          hint=f"per-element details in {session.path}/gates.json")
