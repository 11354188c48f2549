"""What the report reads from a session record: its name, mask, raw records, and the groups and loops its tables
and figures are made of."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from softbench.core.numbers import finite
from softbench.core.session import read_jsonl
from softbench.core.shapes import mask_words
from softbench.core.utc import folder_time
from softbench.predictions.evaluate import kernel_option
from softbench.predictions.sessions import SessionRecord


LOOP_KEYS = ("loop", "label", "kernel", "variant")  # how energy samples name the loop they belong to


def marked_name(rec: SessionRecord) -> str:
    return rec.name + ("" if rec.complete else " (partial)")


def kernel_config(rec: SessionRecord, kernel: str | None = None) -> str:
    """The kernel configuration a kernel of the session ran in (the baseline unless `kernel` names another label),
    as its worker reported it (its build info in smoke.json's summary: the resolved defaults included, which
    protocol.yaml's backend_options leave out); '' where none was reported (FA4, FA3, the simulation)."""
    label = kernel_option(rec.facts.get("baseline") if kernel is None else kernel, "label", rec)
    return label if isinstance(label, str) else ""


def first_variant(rec: SessionRecord) -> str:
    """The variant whose speed-up summary.json heads with (speedup_pct and its interval): for a sweep run the first
    it summarized, which need not be the first name given to --variants (protocol.yaml's, and the facts'). Every
    table cell and figure that shows that speed-up names this variant."""
    return str(rec.summary.get("variant") or rec.facts.get("variant") or "?")


def variant_config(rec: SessionRecord) -> str:
    """The configuration the variant ran in where it is not the baseline's (latency --variant-config), else ''."""
    variant = first_variant(rec)
    label = kernel_config(rec, variant) if isinstance(variant, str) else ""
    return label if label != kernel_config(rec) else ""


def bar_label(rec: SessionRecord) -> str:
    """A bar's name in the speed-up figures: the session's start time (its folder stamp, HHMMSS), its kernel
    configuration (a Gluon label without its "gluon-" prefix: n128s2-c240l24-hg8-g1-lt-tb), and the quantity when it
    is not the speed-up at equal clock."""
    started = folder_time(rec.name)
    stamp = started.strftime("%H%M%S") if started else rec.name[:6]
    config = kernel_config(rec)
    options = config.removeprefix("gluon-")
    own = variant_config(rec)
    if own:  # the variant in a configuration of its own: both, the baseline's first
        options = f"{options} / {first_variant(rec)} {own.removeprefix('gluon-')}"
    quantity = rec.facts.get("quantity")
    return " ".join(x for x in (stamp, options, quantity if quantity not in (None, "at equal clock") else "") if x)


def mask_label(causal: Any) -> str:
    return mask_words(causal) if isinstance(causal, bool) else "?"


def safe_name(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "-" for c in text)


def raw_records(rec: SessionRecord, name: str) -> list[dict]:
    p = Path(rec.path) / name
    return read_jsonl(p) if p.exists() else []


def lat_group(rec: SessionRecord) -> tuple:
    f = rec.facts
    return (f.get("backend", "?"), f.get("dtype", "?"), mask_label(f.get("causal")),
            f"{f.get('baseline', '?')} vs {first_variant(rec)}")


def loop_name(rec: dict, fallback: Any) -> str:
    """'0 A0' for a record with a loop index and a variant; else whichever naming key it has."""
    if "loop" in rec and "variant" in rec:
        return f"{rec['loop']} {rec['variant']}"
    return str(next((rec[k] for k in ("name",) + LOOP_KEYS if k in rec), fallback))


def loop_entries(summary: dict) -> list[tuple[str, dict]]:
    """Per-loop mappings of an energy summary, whether kept as a list or as a mapping by name."""
    for k in ("loops", "per_loop", "variants", "kernels"):
        v = summary.get(k)
        if isinstance(v, dict) and v and all(isinstance(x, dict) for x in v.values()):
            return [(str(n), x) for n, x in v.items()]
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            return [(loop_name(x, i), x) for i, x in enumerate(v)]
    return []


def fidelity_conditions(summary: dict) -> list[tuple[str, dict]]:
    conds = summary.get("conditions")
    if isinstance(conds, dict):
        items = [(str(k), v) for k, v in conds.items() if isinstance(v, dict)]
    elif isinstance(conds, list):
        items = [(str(next((c[k] for k in ("name", "condition", "label") if k in c), i)), c)
                 for i, c in enumerate(conds) if isinstance(c, dict)]
    else:
        items = []
    return [(n, c) for n, c in items if all(finite(c.get(k)) is not None for k in ("dnll", "ci_low", "ci_high"))]


# a fidelity session's baselines, as softbench.fidelity.conditions names them (not imported: it pulls in torch,
# which a report does not otherwise load)
EXACT = "exact"  # the simulation's and the row path's baseline: attention with FP32 softmax
KERNEL_STOCK = "kernel:stock"  # the kernel path's baseline: the kernel's own exact variant at the session's dtype
# ... and as a reader needs them named: what its dNLLs are differences from
REFERENCE_WORDS = {EXACT: "exact attention (FP32 softmax)",
                   KERNEL_STOCK: "the kernel path's own stock kernel (A0) at the session's dtype"}


def fidelity_reference(summary: dict) -> str:
    """What a fidelity session's dNLLs are measured against: its baseline's name ('exact' on the simulation's and
    the row paths, 'kernel:stock' on the kernel path); '?' where it records none."""
    b = summary.get("baseline")
    if isinstance(b, dict) and b.get("name"):
        return str(b["name"])
    if isinstance(b, str):
        return b
    # a summary that names no baseline: its path says what the dNLLs are against
    return {"sim": EXACT, "row": EXACT, "kernel": KERNEL_STOCK}.get(str(summary.get("path")), "?")


def traced_point(rec: SessionRecord, seq: int, causal, variant: str) -> dict:
    """The point record of one variant at one length in a trace session; empty where the session has none."""
    for p in rec.summary.get("points") or []:
        if isinstance(p, dict) and (p.get("seq"), bool(p.get("causal")), p.get("variant")) == (seq, bool(causal), variant):
            return p
    return {}


def trace_points(rec: SessionRecord) -> list[dict]:
    return sorted((p for p in rec.summary.get("table") or [] if isinstance(p.get("seq"), int)),
                  key=lambda p: (bool(p.get("causal")) is False, p["seq"]))
