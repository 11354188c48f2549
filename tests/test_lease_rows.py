"""tools/analysis/lease_rows.py: docs/leases.md's per-lease tables of A0 and a variant against FA3 are what the
committed sessions give, row by row, and a session without the reference gets no row."""

import re
from pathlib import Path

import pytest

from tests.repo_tools import load_tool

ROOT = Path(__file__).resolve().parents[1]
lease_rows = load_tool("analysis/lease_rows.py")
# the columns read from the sessions: A0 / FA3, A0 per pair, the variant per pair, the A/A null
MEASURED = slice(3, 7)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def lease_table_rows() -> list[tuple[str, list[str]]]:
    """(session folder stamp, cells) for each row of docs/leases.md's tables with the tool's header. A row names its
    session by the full stamp (20261204T192650Z) or by its time alone (192808Z) after a full stamp of the same day."""
    header = lease_rows.HEADER.splitlines()[0]
    rows, inside, day = [], False, None
    for line in (ROOT / "docs" / "leases.md").read_text().splitlines():
        if line.strip() == header:
            inside, day = True, None
            continue
        if inside and not line.startswith("|"):
            inside = False
        if not inside or line.startswith("| ---"):
            continue
        cells = _cells(line)
        stamp = cells[-1].strip("`")
        full = re.fullmatch(r"(\d{8})T\d{6}Z", stamp)
        if full:
            day = full.group(1)
        elif re.fullmatch(r"\d{6}Z", stamp) and day:
            stamp = f"{day}T{stamp}"
        rows.append((stamp, cells))
    return rows


def _session(stamp: str) -> Path:
    found = sorted((ROOT / "sessions").glob(f"{stamp}-latency-*"))
    assert len(found) == 1, f"no single latency session for {stamp}"
    return found[0]


def test_the_lease_tables_hold_what_the_sessions_give():
    rows = lease_table_rows()
    assert len(rows) >= 25  # the leases of 19:23-20:05 and 21:17-21:24
    for stamp, cells in rows:
        computed = _cells(lease_rows.row(_session(stamp), "ref-fa3"))
        assert cells[MEASURED] == computed[MEASURED], stamp
        assert cells[0] == computed[0], stamp  # the shape


def test_the_row_of_one_session():
    """BF16 causal 16K with K's ring three long (sealed/k-ring.yaml): the configuration as the worker reported it,
    two processes per kernel, and the per-pair figures of its row in docs/leases.md."""
    line = lease_rows.row(_session("20261204T211715Z"), "ref-fa3")
    assert _cells(line) == [
        "BF16 causal 16K", "`gluon-n128s3-c240l24-hg4-pd-rl-ro-ltt-pm-tb-mlf-ka-v2`", "30 s, 2 processes per kernel",
        "1.000", "+0.12% [-0.30, +0.51]", "h15-folded: -0.67% [-1.06, -0.01]", "-0.21% [-0.53, +0.09]",
        "`20261204T211715Z`"]


def test_a_sustained_session_says_so_in_its_budget():
    """The sustained protocol has no time budget: its row names the blocks each kernel was timed in instead, so a
    sustained figure is never read as one at equal clock."""
    cells = _cells(lease_rows.row(_session("20261205T021416Z"), "ref-fa3"))
    assert cells[2] == "sustained, 4 cycles of 4 s blocks"
    assert cells[5] == "h15-folded: +7.47% [+7.45, +7.50]"


def test_a_session_without_the_reference_gets_no_row(capsys):
    with pytest.raises(ValueError, match="did not time ref-fa4"):
        lease_rows.row(_session("20261204T211715Z"), "ref-fa4")
    assert lease_rows.main([str(_session("20261204T211715Z")), "--reference", "ref-fa4"]) == 2
    out = capsys.readouterr()
    assert "no row" in out.err and out.out.strip() == lease_rows.HEADER
