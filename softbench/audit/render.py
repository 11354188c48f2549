"""`softbench audit`'s printers: summary.json -> tables, notes and summary.md (they read results, never measure)."""

from __future__ import annotations

from softbench.audit import barrier_waits
from softbench.core.tables import fmt, md_heading, md_table

# static SASS columns: family key in summary["sass"][v], column title
SASS_COLUMNS = (("total", "instr."), ("MUFU_EX2", "MUFU.EX2"), ("FFMA", "FFMA"), ("FMUL", "FMUL"),
                ("FADD", "FADD"), ("FMNMX", "FMNMX"), ("SHIFT", "SHF/SHL"), ("LEA", "LEA"), ("IADD3", "IADD3"),
                ("CONVERT", "F2F/F2FP"), ("MMA", "MMA"), ("LDS", "LDS"), ("STS", "STS"))
NCU_COLUMNS = (("duration_us", "duration us", ".1f"), ("mufu_pipe_pct", "XU %", ".1f"),
               ("fma_pipe_pct", "FMA %", ".1f"), ("alu_pipe_pct", "ALU %", ".1f"),
               ("issue_active_pct", "issue %", ".1f"), ("instructions", "instr. (M)", "M"),
               ("registers_per_thread", "regs", ".0f"), ("achieved_occupancy_pct", "occupancy %", ".1f"),
               ("local_load_bytes", "local ld B", ".0f"), ("local_store_bytes", "local st B", ".0f"),
               ("l2_hit_rate_pct", "L2 hit %", ".1f"), ("dram_read_bytes", "DRAM read (MB)", "M"),
               ("sm_active_max_over_mean", "busiest SM / mean", ".3f"),
               ("tensor_active_pct", "tensor %", ".1f"), ("tensor_busy_us", "tensor busy us", ".1f"),
               ("sm_clock_mhz", "SM MHz", ".0f"))


def _ncu_cell(v, spec: str) -> str:
    """One counter; spec "M": in millions."""
    if spec == "M":
        return fmt(None if v is None else v / 1e6, ".1f")
    return fmt(v, spec)


def audit_tables(summary: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, columns, rows) for the static SASS table and, when counters were read, the ncu table."""
    tag = summary.get("shape_tag", "")
    variants = summary.get("variants", [])
    sass, tables = summary.get("sass") or {}, []
    rows = []
    for v in variants:
        fam = sass.get(v)
        depth = (summary.get("dependency_depth") or {}).get(v) or {}
        rows.append([v] + [fmt(fam.get(k) if fam else None, "d") for k, _ in SASS_COLUMNS] + [
            fmt((summary.get("registers") or {}).get(v), "d"), fmt((summary.get("spills") or {}).get(v), "d"),
            fmt((summary.get("local_bytes") or {}).get(v), "d"),
            fmt((summary.get("per_element") or {}).get(v), ".2f"),
            fmt((summary.get("per_element_dynamic") or {}).get(v), ".2f"), fmt(depth.get("median"), ".0f")])
    tables.append((f"{tag}: attention kernel, static SASS{compiled_for(summary)}",
                   ["variant"] + [t for _, t in SASS_COLUMNS] + ["regs", "LDL+STL", "local B", "per elem.",
                                                               "per elem. (ncu)", "depth"], rows))
    tables += budget_tables(summary) + loop_tables(summary)
    ncu = summary.get("ncu") or {}
    if ncu:
        read = [v for v in variants if v in ncu]
        # a counter no launch has (one a session recorded before softbench asked for it) gets no column
        columns = [c for c in NCU_COLUMNS if any(ncu[v].get(c[0]) is not None for v in read)]
        rows = [[v] + [_ncu_cell(ncu[v].get(k), spec) for k, _, spec in columns] for v in read]
        tables.append((f"{tag}: Nsight Compute, one launch each (--clock-control none)",
                       ["variant"] + [t for _, t, _ in columns], rows))
        tables += stall_tables(summary) + source_stall_tables(summary)
    return tables


def stall_tables(summary: dict, most: int = 10) -> list[tuple[str, list[str], list[list[str]]]]:
    """Warps stalled per issued instruction, by reason (Nsight Compute's warp states): the `most` reasons with the
    largest total over the rows, largest first; no table where no reason was read."""
    ncu = summary.get("ncu") or {}
    rows_of = [v for v in summary.get("variants", []) if v in ncu]
    totals = {}
    for v in rows_of:
        for key, value in ncu[v].items():
            if key.startswith("stall_") and value is not None:
                totals[key] = totals.get(key, 0.0) + value
    keys = sorted((k for k in totals if totals[k] > 0), key=lambda k: -totals[k])[:most]
    if not keys:
        return []
    rows = [[v] + [fmt(ncu[v].get(k), ".2f") for k in keys] for v in rows_of]
    return [(f"{summary.get('shape_tag', '')}: warps stalled per issued instruction, by reason (Nsight Compute)",
             ["variant"] + [k[len("stall_"):].replace("_", " ") for k in keys], rows)]


def source_stall_tables(summary: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    """--source-stalls: per launch, where its working warps' samples fall (the parked warps apart), its longest
    run of back-to-back MUFU.EX2 with the executions of its first instruction, its three opcodes with the
    most samples, and its samples at the mbarrier waits by what they waited for (softbench.audit.barrier_waits;
    "not recorded" in audits written before it)."""
    src = summary.get("source_stalls") or {}
    rows = []
    for v in [v for v in summary.get("variants", []) if v in src]:
        s = src[v]
        runs = sorted(s.get("mufu_runs") or [], key=lambda r: (-r["executions"], -r["length"]))
        longest = f"{runs[0]['length']} ({runs[0]['executions']})" if runs else "none"
        shares = sorted((s.get("reasons_pct") or {}).items(), key=lambda kv: -kv[1])[:3]
        reasons = ", ".join(f"{k} {p:.0f}%" for k, p in shares)
        ops = ", ".join(f"{o['opcode']} {o['samples']}" for o in (s.get("opcodes") or [])[:3])
        parked = s["parked_samples"] / s["samples"] if s.get("samples") else None
        rows.append([v, fmt(s.get("samples"), "d"), fmt(None if parked is None else 100 * parked, ".0f"), reasons,
                     longest, ops, barrier_waits.brief(s.get("barrier_waits"))])
    if not rows:
        return []
    return [(f"{summary.get('shape_tag', '')}: where the warps wait, instruction by instruction (Nsight Compute's "
             "source counters; page in ncu/<variant>-sass.csv.gz)",
             ["variant", "samples", "parked %", "main reasons (working warps)",
              "longest MUFU.EX2 run (executions)", "opcodes with most samples",
              "mbarrier waits, samples: K or Q / V / producer"], rows)]


# the key loop's columns (--backend triton): key in summary["loop"][v], column title
LOOP_COLUMNS = (("loop_instructions", "loop instr."), ("loop_mufu_ex2", "MUFU.EX2"), ("loop_ffma", "FFMA"),
                ("loop_ffma_sat", "FFMA.SAT"), ("loop_fmnmx", "FMNMX"), ("loop_fadd", "FADD"),
                ("loop_shift", "SHF/SHL"), ("loop_f2fp", "F2FP"), ("loop_prmt", "PRMT"), ("loop_gmma", "GMMA"),
                ("loop_bar_sync", "BAR.SYNC"), ("loop_fmul_jumped", "FMUL jumped"))


def loop_tables(summary: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    """One iteration of the key loop per variant, with the configuration it compiled in (--backend triton)."""
    loop = summary.get("loop") or {}
    if not loop:
        return []
    configs = summary.get("kernel_config") or {}
    shared = len(set(configs.values())) == 1  # then named once, in the title
    rows = [[v] + ([] if shared else [configs.get(v, "")]) + [fmt(loop[v].get(k), "d") for k, _ in LOOP_COLUMNS]
            for v in summary.get("variants", []) if v in loop]
    where = f", {next(iter(configs.values()))}" if shared else ""
    return [(f"{summary.get('shape_tag', '')}: one iteration of the key loop (both branches, masked and not){where}",
             ["variant"] + ([] if shared else ["configuration"]) + [t for _, t in LOOP_COLUMNS], rows)]


def compiled_for(summary: dict) -> str:
    """', compiled for sm_100a, not run' for a cross-compile's titles; '' otherwise."""
    return f", compiled for {summary.get('arch')}, not run" if summary.get("compiled_only") else ""


def budget_tables(summary: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    """The nominal per-score budget beside each variant's static per-element estimate (softbench.audit.budget)."""
    b = summary.get("budget")
    if not b:
        return []
    rows = [[v, fmt(c.get("per_element_static"), ".2f"), fmt(b["issue_slots_per_score"], ".1f"),
             fmt(c.get("share_of_issue_slots"), ".2f")] for v, c in (b.get("variants") or {}).items()]
    return [(f"{summary.get('shape_tag', '')}: per-score issue budget on {b['arch_family']} (nominal rates, static "
             "counts)", ["variant", "per elem. (static)", "issue slots/score", "share"], rows)]


def budget_note(summary: dict) -> list[str]:
    b = summary.get("budget")
    if not b:
        return []
    return [f"budget ({b['arch_family']} {b['dtype']} d{b['head_dim']}, nominal): {b['tensor_flop_per_clock_sm']} "
            f"tensor-core FLOP/clk/SM / {b['flop_per_score']} FLOP per score = {b['scores_per_clock_sm']:g} "
            f"scores/clk/SM, so {b['issue_slots_per_score']:g} issue slots ({b['issue_per_clock_sm']} "
            f"thread-instructions/clk/SM) and {b['mufu_ex2_per_score']:g} MUFU ex2 "
            f"({b['mufu_ex2_per_clock_sm']}/clk/SM) per score; share = per element / issue slots"]


def audit_notes(summary: dict) -> list[str]:
    lines = []
    if summary.get("compiled_only"):
        t = summary.get("target") or {}
        lines.append(f"compiled for {summary.get('arch')} ({t.get('gpu')}, {summary.get('target_sms')} SMs assumed) "
                     "on this machine and not run: static SASS only, no counters")
    ref = summary.get("per_element_reference")
    if ref:
        n = summary.get("per_element_elements_static")
        # without noexp the element count is each variant's own (the MUFU.EX2 it removed), not one number
        counted = (f"{n} element exponentials in A0's code" if n else
                   "elements counted per variant as the MUFU.EX2 it removes from A0")
        lines.append(f"per element: static instructions of the exponential path per score element, reference "
                     f"{ref} ({counted})")
    for v, fams in (summary.get("per_element_by_family") or {}).items():
        if fams:
            lines.append(f"  {v}: " + ", ".join(f"{k} {x:+.2f}" for k, x in fams.items()))
    lines += [f"note: {n}" for n in (summary.get("per_element_notes") or [])]
    lines += budget_note(summary)
    lines += counter_notes(summary)
    for v, errs in (summary.get("errors") or {}).items():
        for step, msg in errs.items():
            lines.append(f"error [{v} {step}]: {msg}")
    return lines


def counter_notes(summary: dict) -> list[str]:
    """Which reader gave each variant's counters, and whether every other reader agreed on the same report."""
    lines = []
    for v, reader in (summary.get("counter_reader") or {}).items():
        via = f" (collected through {summary['collector']})" if summary.get("collector") == "nsight-python" else ""
        checks = (summary.get("counter_check") or {}).get(v) or {}
        agree = [f"{name} {'equal' if c.get('equal') else 'DIFFERS'} on {c.get('compared', 0)} metrics"
                 for name, c in checks.items()]
        lines.append(f"counters [{v}]: read by {reader.get('name')} {reader.get('version') or ''}".rstrip() + via +
                     ("; " + ", ".join(agree) if agree else "; no other reader to check them"))
    for v, failed in (summary.get("counter_reader_failures") or {}).items():
        for name, msg in failed.items():
            lines.append(f"counters [{v}]: {name} could not read the report: {msg}")
    return lines


def audit_markdown(summary: dict, title: str) -> str:
    lines = md_heading(title, summary, complete_if_unsaid=True)
    lines += [f"- backend `{summary.get('backend')}`, shape `{summary.get('shape_tag')}`, "
              f"kernel /{summary.get('kernel_regex')}/{compiled_for(summary)}", ""]
    for v, name in (summary.get("kernel") or {}).items():
        lines.append(f"- {v}: `{name}`")
    lines.append("")
    for tbl_title, columns, rows in audit_tables(summary):
        lines += [f"## {tbl_title}", ""] + md_table(columns, rows)
        lines.append("")
    lines += [f"- {ln.strip()}" for ln in audit_notes(summary)]
    lines += ["", "Method, per element: " + str(summary.get("per_element_method", "")), "",
              *(["Method, budget: " + summary["budget"]["method"], ""] if summary.get("budget") else []),
              "Spills: " + str(summary.get("spills_method", "")), ""]
    depth = next(iter((summary.get("dependency_depth") or {}).values()), None)
    if depth:
        lines += ["Dependency depth: " + depth.get("method", ""), ""]
    return "\n".join(lines)
