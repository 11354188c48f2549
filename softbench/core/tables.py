"""The one number formatter and the one Markdown table helper of every printer (summary.json -> text)."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from softbench.core.numbers import finite_interval, is_real


def fmt(v: Any, spec: str = ".4f", none: str = "-") -> str:
    """`v` formatted by `spec`; None as `none`; a whole float under "d" as the integer; booleans and values `spec`
    does not fit (text, a missing reading recorded as a word) as they print."""
    if v is None:
        return none
    if isinstance(v, bool):
        return str(v)
    if spec == "d" and isinstance(v, float) and v.is_integer():  # a count read as a float (ncu's registers)
        v = int(v)
    try:
        return format(v, spec)
    except (TypeError, ValueError, OverflowError):  # the last: a JSON integer past a float's range under "f"
        return str(v)


NO_INTERVAL = "none (too few pairs)"  # what a session records as NaN bounds: too few pairs for an interval


def fmt_rate(v: Any, spec: str = ".1f") -> str:
    """A rate such as TFLOP/s: by `spec` where that keeps three significant digits, else with three (the CPU
    simulation's 0.00534 TFLOP/s printed as 0.0 would read as no work at all)."""
    if is_real(v) and 0 < abs(v) < 100:
        return format(v, ".3g")
    return fmt(v, spec)


def fmt_interval(ci: Any, spec: str = "+.2f", none: str = NO_INTERVAL) -> str:
    """A recorded 95% interval as '[+5.29, +6.12]'; `none` where the session has none (too few pairs: NaN)."""
    bounds = finite_interval(ci)
    return none if bounds is None else f"[{bounds[0]:{spec}}, {bounds[1]:{spec}}]"


def fmt_estimate(estimate: Any, ci: Any, spec: str = "+.2f", unit: str = "", missing: str = "-",
                 no_interval: str = "") -> str:
    """'+5.71 [+5.29, +6.12]': an estimate (`unit` after it) with its recorded 95% interval; `missing` where there
    is no estimate; where it has no interval, the estimate alone, or followed by `no_interval` when that is given.
    An estimate of another kind (text, a list, a bool) raises TypeError: unlike fmt's cells, an estimate printed as
    it stands would pass for a measurement, so the report leaves its session out instead."""
    if estimate is None:
        return missing
    if not is_real(estimate):
        raise TypeError(f"the estimate {estimate!r} is not a number")
    interval = fmt_interval(ci, spec, none=no_interval)
    return f"{format(estimate, spec)}{unit}" + (f" {interval}" if interval else "")


def md_table(columns: Sequence[str], rows: Iterable[Sequence[str]], bar: str | None = None) -> list[str]:
    """A Markdown table as lines: header, separator, one line per row. `bar`, when given, replaces '|' inside
    the row cells (the header is written as it is)."""
    lines = ["| " + " | ".join(columns) + " |", "| " + " | ".join("---" for _ in columns) + " |"]
    for row in rows:
        cells = row if bar is None else (c.replace("|", bar) for c in row)
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def md_heading(title: str, summary: dict, complete_if_unsaid: bool = False) -> list[str]:
    """A session's Markdown title, and the partial-session warning under it when the session did not finish.
    complete_if_unsaid: a summary without a "complete" key counts as complete (sessions older than the key)."""
    lines = [f"# {title}", ""]
    if not summary.get("complete", complete_if_unsaid):
        lines += [f"**PARTIAL SESSION**: {summary.get('incomplete_reason', 'not finished')}", ""]
    return lines
