"""summary.json of an audit session, from the per-variant records (pure)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from softbench.audit import budget as budget_mod
from softbench.audit import cross
from softbench.audit import sass as sass_mod
from softbench.core.shapes import Shape

if TYPE_CHECKING:
    from softbench.audit.engine import AuditOptions
    from softbench.audit.tools import Tools

# what the element count on sm_100 rests on (softbench.audit.sass.EMULATED_EX2_OPCODES)
FA4_SM100_EMULATION = ("FA4's sm_100 forward computes part of its exponentials with a polynomial on the FMA pipe "
                       "(ex2_emu_freq/ex2_emu_res in its tuning; none on sm_103), without MUFU.EX2: the element "
                       "count n takes them from the round-down adds each emulation starts with "
                       "(per_element_emulated_static), so the per-element values are per score element, emulated "
                       "or not")
SPILLS_METHOD = ("static count of local-memory instructions (LDL + STL) in the attention kernel; "
                 "local_bytes is cuobjdump's LOCAL (bytes of local memory per thread)")


def summarize_audit(records: dict[str, dict], opts: AuditOptions, shape: Shape, tools: Tools | None = None) -> dict:
    """summary.json: per-variant blocks under dotted-path keys the predictions evaluator addresses
    (ncu.<v>.mufu_pipe_pct, registers.<v>, spills.<v>, sass.<v>.<family>, per_element.<v>, ...)."""
    fams = {v: r["families"] for v, r in records.items() if r.get("families")}
    ncu_vals = {v: r["ncu"] for v, r in records.items() if r.get("ncu")}
    pe = sass_mod.per_element_costs(fams, opcodes={v: r["opcodes"] for v, r in records.items() if r.get("opcodes")})
    arch = budget_arch(records, opts)
    if opts.backend == "fa4" and budget_mod.capability(arch) == 100 and pe.get("reference"):
        pe["notes"].append(FA4_SM100_EMULATION)
    dyn = sass_mod.per_element_dynamic(ncu_vals)
    registers, reg_source, spills, local_bytes, stack_bytes = {}, {}, {}, {}, {}
    for v, r in records.items():
        res = r.get("resources") or {}
        if "REG" in res:
            registers[v], reg_source[v] = res["REG"], "cuobjdump"
        elif (r.get("ncu") or {}).get("registers_per_thread") is not None:
            registers[v], reg_source[v] = r["ncu"]["registers_per_thread"], "ncu"
        if r.get("families"):
            spills[v] = r["families"]["LDL"] + r["families"]["STL"]
        if "LOCAL" in res:
            local_bytes[v] = res["LOCAL"]
        if "STACK" in res:
            stack_bytes[v] = res["STACK"]
    evidence = [k for k, present in (("sass", fams), ("ncu", ncu_vals)) if present]
    return {
        "command": "audit", "backend": opts.backend, "shape": shape.to_dict(), "shape_tag": shape.tag(),
        **cross.target_record(opts.arch),
        "variants": list(records), "kernel_regex": opts.kernel_regex, "evidence": evidence,
        "kernel": {v: r.get("kernel") for v, r in records.items()},
        "sass": fams,
        "registers": registers, "registers_source": reg_source,
        "spills": spills, "spills_method": SPILLS_METHOD, "local_bytes": local_bytes, "stack_bytes": stack_bytes,
        "per_element": pe["per_element"], "per_element_method": pe["method"],
        "per_element_reference": pe.get("reference"), "per_element_elements_static": pe.get("elements_static"),
        "per_element_emulated_static": pe.get("emulated_static"),
        "per_element_by_family": pe["by_family"], "per_element_notes": pe["notes"],
        "per_element_dynamic": dyn["per_element"], "per_element_dynamic_notes": dyn["notes"],
        "budget": budget_mod.budget_block(arch, shape.dtype, shape.head_dim, pe["per_element"]),
        "dependency_depth": {v: r["dependency_depth"] for v, r in records.items() if r.get("dependency_depth")},
        # --backend triton: the configuration each variant compiled in, and one iteration of its key loop (both
        # branches, masked and not, where the kernel has them: softbench.kernels.triton_compile)
        "kernel_config": {v: r["triton"]["config"] for v, r in records.items() if r.get("triton")},
        "loop": {v: r["triton"]["loop"] for v, r in records.items() if r.get("triton")},
        "ncu": ncu_vals,
        "ncu_notes": {v: r["ncu_notes"] for v, r in records.items() if r.get("ncu_notes")},
        # --source-stalls: each launch's per-instruction stall samples, summarized (softbench.audit.source_stalls)
        "source_stalls": {v: r["source_stalls"] for v, r in records.items() if r.get("source_stalls")},
        "collector": opts.collector if opts.use_ncu else None,
        "counter_reader": {v: r["counter_reader"] for v, r in records.items() if r.get("counter_reader")},
        "counter_check": {v: {name: {k: c[k] for k in ("equal", "compared", "differences")}
                              for name, c in r["counter_check"].items()}
                          for v, r in records.items() if r.get("counter_check") is not None},
        "counter_reader_failures": {v: r["counter_reader_failures"] for v, r in records.items()
                                    if r.get("counter_reader_failures")},
        "errors": {v: r["errors"] for v, r in records.items() if r.get("errors")},
        "tools": {"ncu": tools.ncu, "cuobjdump": tools.cuobjdump, "nvdisasm": tools.nvdisasm} if tools else None,
    }


def budget_arch(records: dict[str, dict], opts: AuditOptions) -> str | int | None:
    """The architecture the budget is for: the target compiled for, else the GPU the kernels ran on."""
    if opts.target is not None:
        return opts.target.arch
    archs = [((r.get("run") or {}).get("device") or {}).get("arch") for r in records.values()]
    return next((a for a in archs if a is not None), None)
