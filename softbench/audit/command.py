"""`softbench audit`: static instruction audit (SASS) and Nsight Compute counters of each variant's compiled
attention forward. The printers at the bottom read summary.json only."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from softbench.core.options import shape_options, shapes_from
from softbench.latency.render import md_table

# static SASS columns: family key in summary["sass"][v], column title
SASS_COLUMNS = (("total", "instr."), ("MUFU_EX2", "MUFU.EX2"), ("FFMA", "FFMA"), ("FMUL", "FMUL"),
                ("FADD", "FADD"), ("FMNMX", "FMNMX"), ("SHIFT", "SHF/SHL"), ("LEA", "LEA"), ("IADD3", "IADD3"),
                ("CONVERT", "F2F/F2FP"), ("MMA", "GMMA"), ("LDS", "LDS"), ("STS", "STS"))
NCU_COLUMNS = (("duration_us", "duration us", ".1f"), ("mufu_pipe_pct", "XU %", ".1f"),
               ("fma_pipe_pct", "FMA %", ".1f"), ("alu_pipe_pct", "ALU %", ".1f"),
               ("issue_active_pct", "issue %", ".1f"), ("instructions", "instr. (M)", "M"),
               ("registers_per_thread", "regs", ".0f"), ("achieved_occupancy_pct", "occupancy %", ".1f"),
               ("local_load_bytes", "local ld B", ".0f"), ("local_store_bytes", "local st B", ".0f"),
               ("sm_clock_mhz", "SM MHz", ".0f"))


@click.command("audit")
@shape_options()
@click.option("--backend", type=click.Choice(["fa4"]), default="fa4", show_default=True,
              help="the compiled kernels audited (FlashAttention-4 on a CUDA GPU)")
@click.option("--variants", default="A0,A1,noexp", show_default=True,
              help="comma-separated variants; A0 and noexp give the per-element estimate its reference")
@click.option("--ncu/--no-ncu", "use_ncu", default=True, show_default=True,
              help="also read hardware counters with Nsight Compute (one launch per variant)")
@click.option("--ncu-path", type=click.Path(dir_okay=False), default=None, help="the ncu executable [default: found]")
@click.option("--collector", type=click.Choice(["ncu", "nsight-python"]), default="ncu", show_default=True,
              help="who runs Nsight Compute: softbench's own ncu command line, or NVIDIA's nsight-python "
              "(0.9.6 with ncu 2025.3.1; 1.x needs ncu 2026.2.1 or newer)")
@click.option("--counter-reader", type=click.Choice(["auto", "ncu-report", "host", "csv"]), default="auto",
              show_default=True, help="what reads the report: the ncu-report package, the Nsight Compute "
              "install's own ncu_report module, or ncu's CSV; auto takes the first that reads it, and every "
              "other one found checks its values")
@click.option("--cuobjdump-path", type=click.Path(dir_okay=False), default=None,
              help="the cuobjdump executable [default: found]")
@click.option("--kernel-regex", default=None, help="regular expression naming the attention kernel "
              "[default: FlashAttentionForwardSm]")
@click.option("--warmup", type=click.IntRange(min=0), default=3, show_default=True,
              help="forwards after the compiling one before the profiled launch")
@click.option("--calls", type=click.IntRange(min=1), default=2, show_default=True,
              help="forwards from the profiled launch on")
@click.option("--seed", type=int, default=0, show_default=True, help="input seed")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=1), default=600, show_default=True,
              help="seconds allowed to each process (compile and run, under ncu or not)")
@click.option("--out", "out_dir", default="sessions", show_default=True, type=click.Path(file_okay=False))
def command(dtype, seqs, causal, batch, heads, kv_heads, head_dim, backend, variants, use_ncu, ncu_path,
            collector, counter_reader, cuobjdump_path, kernel_regex, warmup, calls, seed, timeout_s, out_dir):
    """Audit the compiled attention forward of each variant: SASS instruction counts by opcode family,
    registers, spills, the per-element cost of the exponential path, and (with ncu) pipe utilization,
    issue activity and instructions executed. One session per shape.

    Example: softbench audit --seq 8K --causal --variants A0,A1,noexp"""
    from softbench.core.console import RichProgress, err, out, table
    from softbench.core.errors import UnsupportedError, UsageError
    from softbench.kernels.capability import detect_device, fa4_unsupported_reason
    from softbench.kernels.variants import get_variant
    from softbench.audit.engine import DEFAULT_KERNEL_REGEX, AuditOptions, run_audit

    names = tuple(v.strip() for v in variants.split(",") if v.strip())
    if not names:
        raise UsageError("--variants names no variant", hint="e.g. --variants A0,A1,noexp")
    for v in names:
        get_variant(v)
    shapes = shapes_from(dtype, seqs, causal, batch, heads, kv_heads, head_dim)
    device = detect_device()
    for shape in shapes:
        reason = fa4_unsupported_reason(shape, device)
        if reason:
            raise UnsupportedError(f"{shape.tag()}: {reason}",
                                   hint="the audit reads the kernels FA4 compiles; it needs the GPU they run on")
    opts = AuditOptions(shapes=shapes, backend=backend, variants=names, use_ncu=use_ncu, ncu_path=ncu_path,
                        collector=collector, counter_reader=counter_reader,
                        cuobjdump_path=cuobjdump_path, kernel_regex=kernel_regex or DEFAULT_KERNEL_REGEX,
                        warmup=warmup, calls=calls, seed=seed, timeout_s=timeout_s, out_dir=Path(out_dir),
                        command_line="softbench " + " ".join(shlex.quote(a) for a in sys.argv[1:]))
    with RichProgress() as progress:
        sessions = run_audit(opts, progress, render_markdown=audit_markdown)
    for s in sessions:
        summary = s.read_json("summary.json")
        for title, columns, rows in audit_tables(summary):
            out.print(table(title, columns, rows))
        for line in audit_notes(summary):
            out.print(line)
        err.print(f"session: {s.path}")


# --- printers: summary.json -> text ---------------------------------------------------------------------

def _fmt(v, spec: str) -> str:
    if v is None:
        return "-"
    if spec == "M":
        return f"{v / 1e6:.1f}"
    try:
        return format(v, spec)
    except (TypeError, ValueError):
        return str(v)


def audit_tables(summary: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, columns, rows) for the static SASS table and, when counters were read, the ncu table."""
    tag = summary.get("shape_tag", "")
    variants = summary.get("variants", [])
    sass, tables = summary.get("sass") or {}, []
    rows = []
    for v in variants:
        fam = sass.get(v)
        depth = (summary.get("dependency_depth") or {}).get(v) or {}
        rows.append([v] + [_fmt(fam.get(k) if fam else None, "d") for k, _ in SASS_COLUMNS] + [
            _fmt((summary.get("registers") or {}).get(v), "d"), _fmt((summary.get("spills") or {}).get(v), "d"),
            _fmt((summary.get("local_bytes") or {}).get(v), "d"),
            _fmt((summary.get("per_element") or {}).get(v), ".2f"),
            _fmt((summary.get("per_element_dynamic") or {}).get(v), ".2f"), _fmt(depth.get("median"), ".0f")])
    tables.append((f"{tag}: attention kernel, static SASS",
                   ["variant"] + [t for _, t in SASS_COLUMNS] + ["regs", "LDL+STL", "local B", "per elem.",
                                                               "per elem. (ncu)", "depth"], rows))
    ncu = summary.get("ncu") or {}
    if ncu:
        rows = [[v] + [_fmt(ncu[v].get(k), spec) for k, _, spec in NCU_COLUMNS] for v in variants if v in ncu]
        tables.append((f"{tag}: Nsight Compute, one launch each (--clock-control none)",
                       ["variant"] + [t for _, t, _ in NCU_COLUMNS], rows))
    return tables


def audit_notes(summary: dict) -> list[str]:
    lines = []
    ref = summary.get("per_element_reference")
    if ref:
        lines.append(f"per element: static instructions of the exponential path per score element, reference "
                     f"{ref} ({summary.get('per_element_elements_static') or '?'} element exponentials in A0's code)")
    for v, fams in (summary.get("per_element_by_family") or {}).items():
        if fams:
            lines.append(f"  {v}: " + ", ".join(f"{k} {x:+.2f}" for k, x in fams.items()))
    lines += [f"note: {n}" for n in (summary.get("per_element_notes") or [])]
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
    lines = [f"# {title}", ""]
    if not summary.get("complete", True):
        lines += [f"**PARTIAL SESSION**: {summary.get('incomplete_reason', 'not finished')}", ""]
    lines += [f"- backend `{summary.get('backend')}`, shape `{summary.get('shape_tag')}`, "
              f"kernel /{summary.get('kernel_regex')}/", ""]
    for v, name in (summary.get("kernel") or {}).items():
        lines.append(f"- {v}: `{name}`")
    lines.append("")
    for tbl_title, columns, rows in audit_tables(summary):
        lines += [f"## {tbl_title}", ""] + md_table(columns, rows)
        lines.append("")
    lines += [f"- {ln.strip()}" for ln in audit_notes(summary)]
    lines += ["", "Method, per element: " + str(summary.get("per_element_method", "")), "",
              "Spills: " + str(summary.get("spills_method", "")), ""]
    depth = next(iter((summary.get("dependency_depth") or {}).values()), None)
    if depth:
        lines += ["Dependency depth: " + depth.get("method", ""), ""]
    return "\n".join(lines)
