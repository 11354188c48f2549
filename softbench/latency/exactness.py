"""Whether the kernels a latency run times as exact attention (the baseline and its A/A null) are as accurate as
the exact reference kernels timed beside them. A speed-up over a baseline, or the baseline's ratio to FA3, means
nothing if the baseline computes something else: every worker's smoke check measures its error against FP32
attention on the same inputs and rows (softbench.runtime.worker), and the baseline's may exceed the most accurate
reference's by at most EXACT_ERROR_FACTOR. The Gluon kernel's row sums accumulated over a whole row in the FP8
tensor core (-lm) doubled A0's error at FP8 causal 8K (1.48e-2 against FA3's 7.17e-3) and passed every other
check softbench had then."""

from __future__ import annotations

from softbench.core.numbers import finite

EXACT_ERROR_FACTOR = 1.5
EXACT_ROLES = ("baseline", "null")


def exactness(smoke: dict, roles: dict[str, str]) -> dict | None:
    """{reference, reference_error, factor, kernels: {label: {error, ratio, ok}}, ok} from the smoke checks
    (label -> {rel_error_vs_fp32, ...}) and the run's roles; None where no reference kernel has a usable error."""
    def error(label: str) -> float | None:
        entry = smoke.get(label)
        e = entry.get("rel_error_vs_fp32") if isinstance(entry, dict) else None
        return finite(e)

    refs = {lbl: e for lbl, role in roles.items() if role == "reference" and (e := error(lbl))}
    if not refs:
        return None
    best = min(refs, key=refs.get)
    kernels = {}
    for label in (lbl for lbl, role in roles.items() if role in EXACT_ROLES and lbl in smoke):
        e = error(label)
        ratio = e / refs[best] if e is not None else None
        kernels[label] = {"error": e, "ratio": ratio, "ok": ratio is not None and ratio <= EXACT_ERROR_FACTOR}
    return {"reference": best, "reference_error": refs[best], "factor": EXACT_ERROR_FACTOR, "kernels": kernels,
            "ok": all(k["ok"] for k in kernels.values())}


def recorded_exactness(summary: dict) -> dict | None:
    """A latency session's check as summary.json holds it, or, for sessions recorded before it did, made from the
    smoke checks and roles the same summary holds."""
    recorded = summary.get("exactness")
    if recorded:
        # as exactness() writes it; a summary edited into another form has no check to read
        ok = (isinstance(recorded, dict) and isinstance(recorded.get("kernels"), dict)
              and all(isinstance(k, dict) and "ok" in k and "ratio" in k for k in recorded["kernels"].values())
              and "ok" in recorded)
        return recorded if ok else None
    kernels = summary.get("kernels")
    roles = ({lbl: str(k.get("role")) for lbl, k in kernels.items() if isinstance(k, dict)}
             if isinstance(kernels, dict) else {})
    smoke = summary.get("smoke")
    return exactness(smoke if isinstance(smoke, dict) else {}, roles)


def exactness_warning(check: dict | None) -> str | None:
    """exactness_line's warning in a few words, for a table cell beside the speed-up it qualifies; None where
    every kernel checked is exact attention (or nothing was checked)."""
    if not check or not check["kernels"] or check["ok"]:
        return None
    lbl, k = next((lbl, k) for lbl, k in check["kernels"].items() if not k["ok"])
    how = "no error measured" if k["ratio"] is None else f"{k['ratio']:.2f}x {check['reference']}'s error against FP32"
    return f"WARNING: not over exact attention ({lbl}: {how})"


def exactness_line(check: dict | None) -> str | None:
    """One line for the headline: the baseline's error against FP32 beside the reference's, and a warning where
    it is not exact attention."""
    if not check or not check["kernels"]:
        return None
    ref, ref_err = check["reference"], check["reference_error"]
    bad = {lbl: k for lbl, k in check["kernels"].items() if not k["ok"]}
    if not bad:
        worst = max(k["ratio"] for k in check["kernels"].values())
        return (f"exactness: {', '.join(check['kernels'])} within {worst:.2f}x of {ref}'s error against FP32 "
                f"({ref_err:.2e}; at most {check['factor']:g}x allowed)")
    first, *rest = bad.items()
    lbl, k = first
    said = ("has no error measured" if k["ratio"] is None
            else f"error against FP32 is {k['ratio']:.2f}x {ref}'s ({k['error']:.2e} against {ref_err:.2e})")
    others = "".join(f", {o} " + ("no error measured" if ko["ratio"] is None else f"{ko['ratio']:.2f}x")
                     for o, ko in rest)
    return (f"WARNING, not exact attention: {lbl}'s {said}{others}, above the {check['factor']:g}x allowed on the "
            f"same inputs; this run's speed-ups are not over exact attention")
