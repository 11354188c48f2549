"""Which sessions the report can read: each session of a drawn kind is put through the report's own tables on its
own, before anything is drawn, and one whose summary.json or protocol.yaml holds a value of a kind those tables
cannot read (text where a number belongs, a list where a mapping does: a file edited or damaged by hand) is left
out of every table and figure and listed under "sessions not drawn" with the reason, so that one such session
does not end the whole report in an internal error.

The tables are the probe, not a schema of their fields kept beside them: a field the report starts to read is
checked the day it is read. The figures read a few fields the tables do not; build.py's `add` names the figure it
could not draw and goes on."""

from __future__ import annotations

from softbench.predictions.sessions import SessionRecord
from softbench.report.nulls import null_rows
from softbench.report.reestimate import ReferenceEstimates
from softbench.report.replication import replications
from softbench.report.tables import energy_table, fidelity_table, latency_table, trace_table

# what reading a value of the wrong kind raises in the tables' code (StopIteration: next() over an empty choice;
# OverflowError: a JSON integer past a float's range met by a float format or float())
DATA_ERRORS = (TypeError, ValueError, AttributeError, KeyError, IndexError, StopIteration, OverflowError)


def _latency(r: SessionRecord, estimate: ReferenceEstimates) -> None:
    latency_table([r], estimate)
    null_rows([r])
    replications([r], min_sessions=1, estimate=estimate)


PROBES = {
    "latency": _latency,
    "energy": lambda r, _: energy_table([r]),
    "fidelity": lambda r, _: fidelity_table([r]),
    "trace": lambda r, _: trace_table([r]),
}


def split_readable(records: list[SessionRecord], estimate: ReferenceEstimates
                   ) -> tuple[list[SessionRecord], list[tuple[SessionRecord, str]]]:
    """(the sessions the tables read, [(session, why not)] for the others), in the order given."""
    readable, left_out = [], []
    for r in records:
        probe = PROBES.get(r.command)
        if probe is not None and not r.summary:
            # the tables read every figure from the summary: without one they would show empty cells and guess the
            # protocol (a latency session that names none was read as the paper's rounds)
            why = "; ".join(r.problems) or "missing, or holds nothing"
            left_out.append((r, f"no summary.json that holds a result ({why}); left out of every table and figure"))
            continue
        try:
            if probe is not None:
                probe(r, estimate)
        except DATA_ERRORS as e:
            left_out.append((r, f"a value of summary.json or protocol.yaml is of a kind the report cannot read "
                                f"({type(e).__name__}: {e}); left out of every table and figure"))
        else:
            readable.append(r)
    return readable, left_out
