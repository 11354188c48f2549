"""What one fidelity run compares: a baseline and the approximate conditions, each with the path it runs on.

Paths:
- kernel: a real kernel on a GPU, one variant per worker process: baseline A0 (exact exp2), condition A1
  (Rowmax-H15); the kernel is FA4 (stock vs its Rowmax-H15 patch) or softbench's own Triton forward
  (softbench.kernels.triton_attn, the same two weight maps), chosen by --backend.
- sim: the tile-wise semantic simulation of the kernel (softbench.kernels.sim) for operators defined on the
  running maximum; operators defined on the final row maximum go to the whole-row path instead (said in the name).
- row: the offline whole-row path for every operator (scores in FP32, the final row maximum as anchor).
The sim and row paths share the baseline: exact softmax with FP32 scores. A run with a sim condition also runs
sim:exp2, the control (CONTROL_NAME below).

An --operator value may carry its own path, `row:rowmax-h15` or `sim:pot-m:m=2`, to mix paths in one run; a
row-anchored element operator written with `sim:` runs on the running maximum, as asked."""

from __future__ import annotations

from dataclasses import dataclass

from softbench.core.errors import UsageError
from softbench.fidelity.operator_zoo import Operator, parse_operator
from softbench.kernels.catalog import fidelity_variants

PATHS = ("kernel", "sim", "row")
KERNEL_BACKENDS = ("fa4", "triton")
# the operators each backend's kernel implements, by the variant that runs them (A0: the baseline)
KERNEL_OPERATORS = {backend: fidelity_variants(backend) for backend in KERNEL_BACKENDS}
KERNEL_LABELS = {"fa4": "FA4", "triton": "Triton"}
# what each backend's A0 and A1 are, for the conditions' notes (a reader of summary.md sees which kernel ran)
_KERNEL_NOTES = {"fa4": ("stock FA4 (A0)", "patched FA4 ({variant})"),
                 "triton": ("softbench's Triton forward, exact exp2 (A0)",
                            "softbench's Triton forward, Rowmax-H15 weights ({variant})")}
# the kernel that runs is on record in each worker's info (kernel and configuration label)


@dataclass(frozen=True)
class Condition:
    name: str  # e.g. "exact", "sim:rowmax-h15", "row:rowmax-pot:kmax=20,tail=clamp", "kernel:rowmax-h15"
    path: str  # "exact" (the sim/row baseline), "sim", "row" or "kernel"
    operator: Operator | None
    variant: str | None = None  # kernel variant on the kernel path (A0, A1)
    note: str = ""

    @property
    def is_baseline(self) -> bool:
        return self.operator is None

    def describe(self) -> dict:
        d = {"name": self.name, "path": self.path, "baseline": self.is_baseline}
        if self.operator is not None:
            d["operator"] = self.operator.describe()
            d["whole_row"] = self.path == "row"
        if self.variant:
            d["variant"] = self.variant
        if self.note:
            d["note"] = self.note
        if self.name == CONTROL_NAME:
            d["role"] = "control"  # summary.py puts every other sim condition against it
        return d


EXACT = Condition("exact", "exact", None, note="exact softmax, FP32 scores and probabilities, P cast to V's dtype")
# The exact-exp2 simulation on the same tiles, dtype and rescale rule: what the tiling and the storage rounding
# alone change. Added to every run with a tile-wise simulated operator, so that each such operator's summary
# puts it against this control beside the headline against exact attention (summary.py `control`).
CONTROL_NAME = "sim:exp2"
CONTROL_NOTE = "control: exact exp2 through the same tile-wise simulation (added when not asked for)"
KERNEL_BASELINE = Condition("kernel:stock", "kernel", None, variant="A0", note=_KERNEL_NOTES["fa4"][0])


def _split_path(text: str, default: str) -> tuple[str, str, bool]:
    """(path, operator text, whether the path was written with the operator)."""
    head, sep, rest = text.partition(":")
    if sep and head in PATHS:
        return head, rest, True
    return default, text, False


def build_conditions(path: str, operator_texts: tuple[str, ...] | list[str],
                     backend: str = "fa4") -> list[Condition]:
    """Baseline first, then one condition per operator (duplicates refused). `backend`: the kernel path's kernel."""
    if path not in PATHS:
        raise UsageError(f"--path must be one of {', '.join(PATHS)}, not {path!r}")
    if not operator_texts:
        raise UsageError("no --operator given")
    if path == "kernel":
        if backend not in KERNEL_BACKENDS:
            raise UsageError(f"--backend must be one of {', '.join(KERNEL_BACKENDS)}, not {backend!r}")
        if len(operator_texts) > 1:
            # one worker process per kernel, the stock one and one variant: refused here, before the model loads
            raise UsageError(f"--path kernel runs one --operator at a time, got {len(operator_texts)}",
                             hint="run each operator in its own softbench fidelity --path kernel; the simulation "
                                  "(--path sim) takes several at once")
        base_note, variant_note = _KERNEL_NOTES[backend]
        out = [Condition(KERNEL_BASELINE.name, "kernel", None, variant="A0", note=base_note)]
        for text in operator_texts:
            own, rest, _ = _split_path(text, path)
            op = parse_operator(rest)
            implemented = KERNEL_OPERATORS[backend]
            if own != "kernel" or op.canonical not in implemented:
                raise UsageError(
                    f"--path kernel runs the {KERNEL_LABELS[backend]} variants only: "
                    f"{', '.join(implemented)} (got {text!r})",
                    hint="other operators run on the simulation or whole-row paths: --path sim or --path row")
            variant = implemented[op.canonical]
            out.append(Condition(f"kernel:{op.canonical}", "kernel", op, variant=variant,
                                 note=variant_note.format(variant=variant)))
    else:
        out = [EXACT]
        for text in operator_texts:
            own, rest, explicit = _split_path(text, path)
            if own == "kernel":
                raise UsageError(f"{text!r}: the kernel path cannot be mixed with --path {path}",
                                 hint="run --path kernel separately (it needs a GPU and one process per variant)")
            op = parse_operator(rest)
            note = ""
            if own == "sim" and op.scope == "row":
                if explicit:
                    raise UsageError(f"{text!r}: {op.name} needs the whole row (its minimum and maximum), which "
                                     "the tile-wise simulation never has", hint=f"use row:{rest}")
                note = f"{op.name} needs the whole row: evaluated on the offline whole-row path"
                own = "row"
            elif own == "sim" and op.anchor == "row":
                if explicit:
                    note = f"{op.name} is defined on the final row maximum; here it runs on the running maximum"
                else:
                    note = f"{op.name} is defined on the final row maximum: evaluated on the offline whole-row path"
                    own = "row"
            out.append(Condition(f"{own}:{op.canonical}", own, op, note=note))
        if any(c.path == "sim" for c in out) and not any(c.name == CONTROL_NAME for c in out):
            out.append(Condition(CONTROL_NAME, "sim", parse_operator("exp2"), note=CONTROL_NOTE))
    names = [c.name for c in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise UsageError(f"condition(s) given twice: {', '.join(dup)}")
    return out
