"""The record of a completed gates session: gates.json, summary.json and summary.md."""

from __future__ import annotations

from softbench.gates.checks import Gate, json_safe
from softbench.gates.render import gates_markdown
from softbench.gates.tolerances import ENVELOPE, Storage

GATES_FILE = "gates.json"


def record_gates(session, summary: dict, gates: list[Gate], tau: float, storage: Storage, shapes: dict) -> None:
    """Write gates.json, the summary and the status of a completed gates session."""
    from softbench.core.utc import utc_iso

    session.write_json(GATES_FILE, {"gates": [g.to_dict() for g in gates], "rescale_threshold": tau,
                                    "envelope": list(ENVELOPE)})
    applicable = [g for g in gates if g.applicable]
    summary.update({
        "complete": True, "finished_utc": utc_iso(), "rescale_threshold": tau,
        "all_passed": all(g.passed for g in applicable) and bool(applicable),
        "failed": [g.name for g in applicable if not g.passed],
        "not_applicable": [g.name for g in gates if not g.applicable],
        "gates": {g.name: json_safe({"value": list(g.observed), "bound": list(g.bound), "passed": g.passed,
                                     "unit": g.unit, "what": g.what, **_headline_details(g)}) for g in gates},
        "storage": storage.to_dict(),
        "shapes": shapes,
    })
    session.write_json("summary.json", summary)
    session.write_text("summary.md", gates_markdown(summary, session.path.name))
    session.set_status(complete=True, state="complete")


_HEADLINE_KEYS = ("mean", "fraction_outside_before_tolerance", "fraction_below_before_tolerance",
                  "fraction_above_before_tolerance", "shift_min", "shift_max", "shift_mean", "lattice_ties_median",
                  "lattice_ties_max", "ambiguous_elements", "open_anchor_rows", "phase_half_min",
                  "phase_half_max", "rows_one_step_allowed", "elements", "rows", "not_applicable")


def _headline_details(g: Gate) -> dict:
    return {k: g.details[k] for k in _HEADLINE_KEYS if k in g.details}
