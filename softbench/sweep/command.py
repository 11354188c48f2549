"""`softbench sweep`: FA4's own exp2-emulation settings against stock FA4 (paper B.4, Table B5d), and any list
of kernel variants against one baseline."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from softbench.core.options import (CommandGroup, backend_option, check_triton_config, nonempty, null_asked,
                                    protocol_from_cli, references_asked, run_design_options, shape_options,
                                    shapes_from, triton_config_option)


def _command_line() -> str:
    return "softbench " + " ".join(shlex.quote(a) for a in sys.argv[1:])


@click.group("sweep", cls=CommandGroup)
def command():
    """Sweep kernel variants against one baseline with the latency engine."""


@command.command("emulation")
@click.option("--protocol", "protocol_file", type=click.Path(dir_okay=False), default=None,
              callback=nonempty("emulation-sweep-paper"),
              help="YAML sweep file [default: protocols/emulation-sweep-paper.yaml]")
@click.option("--dry-run", is_flag=True, help="print every setting with its beta and run nothing")
@click.option("--out", "out_dir", default="sessions", show_default=True, type=click.Path(file_okay=False))
def emulation(protocol_file, dry_run, out_dir):
    """FA4's exp2 emulation settings (sm_100 only), each a patched stock kernel timed against stock FA4.

    beta, the share of exponentials computed by FA4's polynomial, comes from FA4's own predicate."""
    from softbench.core.checks import check_out_dir
    from softbench.core.console import err, out, table
    from softbench.core.errors import UnsupportedError
    from softbench.sweep.emulation import PAPER_PROTOCOL, check_patch_applies, load_sweep
    from softbench.sweep.render import SETTINGS_COLUMNS, settings_rows

    if not dry_run:  # a bad --out is no machine's fault: heard before the plan, and before the GPU's checks
        check_out_dir(out_dir)
    path = protocol_file or PAPER_PROTOCOL
    sweep = load_sweep(path)
    records, problems = [], {}
    for s in sweep.settings:
        d = s.to_dict()
        reason = check_patch_applies(s)  # anchors checked against the installed FA4 text; nothing is built
        d["patch_check"] = "applies" if reason is None else "refused"
        if reason:
            problems[s.variant] = reason
        records.append(d)
    out.print(table(f"{sweep.name or Path(path).name}: {sweep.shape.tag()} against {sweep.baseline}",
                    SETTINGS_COLUMNS, settings_rows(records)))
    for variant, reason in problems.items():
        out.print(f"patch {variant}: {reason}")
    if sweep.also_compare:
        out.print(f"also against {sweep.baseline}: {', '.join(sweep.also_compare)}")
    if dry_run:
        err.print("dry run: nothing was measured")
        return

    from softbench.core.console import RichProgress
    from softbench.kernels.capability import detect_device, fa4_emulation_reason, fa4_unsupported_reason
    from softbench.sweep.engine import SweepOptions, run_variant_sweep

    device = detect_device()
    reason = fa4_emulation_reason(device)
    if reason:
        raise UnsupportedError(reason, hint="see the settings and their beta with --dry-run; on this GPU compare "
                                            "variants instead: softbench sweep variants --baseline A0 --variants A1,noexp")
    reason = fa4_unsupported_reason(sweep.shape, device)
    if reason:
        raise UnsupportedError(f"{sweep.shape.tag()}: {reason}")
    if problems:
        raise UnsupportedError(f"the emulation patch does not apply to the installed FA4 for {', '.join(problems)}",
                               hint="the reasons are printed above the error")
    info = {r["variant"]: {"description": r["description"], "beta_pct": r["beta_pct"], "setting": r} for r in records}
    opts = SweepOptions(shape=sweep.shape, variants=tuple(sweep.variants()), baseline=sweep.baseline,
                        protocol=sweep.protocol, backend="fa4", kind="emulation", out_dir=Path(out_dir),
                        variant_info=info, command_line=_command_line(),
                        meta={"sweep_file": str(path), "sweep_name": sweep.name, "notes": sweep.notes,
                              "settings": records})
    with RichProgress() as progress:
        session = run_variant_sweep(opts, progress)
    _print_result(session)


@command.command("variants")
@shape_options()
@backend_option()
@click.option("--baseline", default="A0", show_default=True)
@click.option("--variants", "variants", default="A1,noexp", show_default=True,
              help="comma-separated variants; interleaved and sustained: all in one run against the baseline; "
                   "paper: each in its own session")
@run_design_options
@triton_config_option()
@click.option("--out", "out_dir", default="sessions", show_default=True, type=click.Path(file_okay=False))
def variants_cmd(dtype, seqs, causal, batch, heads, kv_heads, head_dim, backend, baseline, variants, protocol_name,
                 rounds, calls, window_ms, target_pp, budget_s, cycles, measure_s, windows, warmup, order, seed, null,
                 references, start_order, processes, null_in_process, triton_config, out_dir):
    """Time each of VARIANTS against BASELINE, with a sorted sweep summary. Under the default interleaved
    protocol every variant, the baseline (its A/A null, --reference) share one interleaving, each cycle in a fresh
    random order; under sustained they share one run too, each kernel in its own blocks; under paper each variant
    is its own latency session. Besides the named variants FA4 emulation settings may be named as
    emu-f<freq>-s<start> (sm_100 only, paper protocol).

    Example: softbench sweep variants --baseline A0 --variants A1,noexp --seq 8K"""
    from softbench.core.console import RichProgress
    from softbench.core.errors import UnsupportedError, UsageError
    from softbench.kernels.capability import detect_device, fa4_emulation_reason, unsupported_reason
    from softbench.kernels.catalog import check as check_variant
    from softbench.sweep.emulation import parse_variant
    from softbench.sweep.engine import SweepOptions, run_variant_sweep
    from softbench.core.checks import check_memory, check_out_dir, check_sim_time
    from softbench.core.options import refuse_repeats, split_names
    from softbench.kernels.references import resolve_references

    names = split_names(variants, "--variants", "A1,noexp")
    refuse_repeats(names, "--variants", "A1,noexp")  # before the machine checks: a typo is no machine's fault
    _refuse_baseline_among(baseline, names)
    check_triton_config(triton_config, backend)
    check_out_dir(out_dir)
    info, emulation = {}, []
    for name in (baseline, *names):
        setting = parse_variant(name)  # FA4 emulation settings by name, e.g. emu-f16-s1
        if setting is None:
            info[name] = {"description": check_variant(backend, name).description}
        else:
            emulation.append(name)
            info[name] = {"description": setting.describe(), "beta_pct": setting.beta_pct, "setting": setting.to_dict()}
    shapes = shapes_from(dtype, seqs, causal, batch, heads, kv_heads, head_dim)
    if emulation and backend != "fa4":
        raise UsageError(f"{', '.join(emulation)}: FA4 emulation settings exist only with --backend fa4")
    for shape in shapes:
        check_memory(shape, backend)
    ctx = click.get_current_context()
    _plan, proto = protocol_from_cli(ctx)  # the protocol's options are bad input on any machine: heard first
    if backend == "sim":  # as latency does: a sweep of hours on a CPU is refused with its estimate
        check_sim_time(shapes, proto)
    if emulation and proto.kind != "paper":
        raise UsageError("FA4 emulation settings are swept under the paper protocol only (add --protocol paper)")
    for shape in shapes:  # refuse before anything runs
        if backend != "sim":
            device = detect_device()
            reason = (unsupported_reason(backend, shape, device)
                      or (fa4_emulation_reason(device) if emulation else None))
            if reason:
                raise UnsupportedError(f"{shape.tag()}: {reason}")
    null = null_asked(ctx, proto, baseline, names)
    refs, _skipped = resolve_references(references_asked(ctx, proto), shapes, backend,
                                        detect_device(prefer_cuda=backend != "sim"))
    for shape in shapes:  # one sweep (a summary session plus one session per variant) per length
        opts = SweepOptions(shape=shape, variants=names, baseline=baseline, protocol=proto, backend=backend,
                            kind="variants", out_dir=Path(out_dir), variant_info=info,
                            backend_options=dict(triton_config), null=null, references=refs, start_order=start_order,
                            processes=processes, null_in_process=null_in_process,
                            command_line=_command_line())
        with RichProgress() as progress:
            session = run_variant_sweep(opts, progress)
        _print_result(session)


def _refuse_baseline_among(baseline: str, names: tuple[str, ...]) -> None:
    """The baseline is never one of --variants, alone or beside others (once, --variants A0 alone ran an A/A-only
    sweep while A0,A1 was refused): its A/A null is what --null times, on by default."""
    from softbench.core.errors import UsageError

    if baseline in names:
        raise UsageError(f"--variants names the baseline {baseline}, which is never one of the variants",
                         hint=f"leave {baseline} out: its A/A null runs anyway under the interleaved and sustained "
                              f"protocols (--null, on by default); for the paper's rounds, softbench latency "
                              f"--protocol paper --variant {baseline}")


def _print_result(session) -> None:
    from softbench.core.console import err, out, table
    from softbench.sweep.render import SWEEP_COLUMNS_NARROW, sweep_rows

    from softbench.sweep.engine import raise_for_failures

    summary = session.read_json("summary.json")
    out.print(table(f"{summary['kind']} sweep, {summary['shape_tag']} ({summary['backend']}), "
                    f"against {summary['baseline']}", SWEEP_COLUMNS_NARROW, sweep_rows(summary, wide=False)))
    for r in summary["rows"]:
        if r.get("error"):
            out.print(f"{r['variant']} failed: {r['error']}")
    err.print(f"session: {session.path}")
    raise_for_failures(session)
