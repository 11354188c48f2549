"""`softbench audit`: static instruction audit (SASS) and Nsight Compute counters of each variant's compiled
attention forward (the printers are in softbench.audit.render)."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import click

from softbench.audit.cross import ARCH_CHOICES, NATIVE
from softbench.core.options import (SEED, WARMUP_CALLS, Finite, backend_option, check_triton_config, shape_options,
                                    shapes_from, triton_config_option, variant_names)
from softbench.core.protocol import MAX_SECONDS, MAX_WINDOW_CALLS


@click.command("audit")
@shape_options()
@backend_option("the compiled kernels audited: fa4 (FlashAttention-4; on a CUDA GPU, or compiled for sm_100a), "
                "triton (softbench's own Hopper kernels, compiled for sm_90a)", only=("fa4", "triton"))
@click.option("--variants", default="A0,A1,noexp", show_default=True,
              help="comma-separated variants; A0 and noexp give the per-element estimate its reference")
@click.option("--arch", type=click.Choice(ARCH_CHOICES), default=NATIVE, show_default=True,
              help="native: compile and run on this machine's CUDA GPU; sm_100a: compile FA4's forward for the "
              "B200 (Blackwell, 148 SMs assumed) on this machine, with or without a GPU, run nothing, and audit "
              "the SASS of what was compiled (needs CuTe DSL installed; no ncu); sm_90a: the same for --backend "
              "triton, the kernel an H200 runs (needs triton)")
@click.option("--reference", "references", default="", show_default=False,
              help="exact reference kernels profiled beside the variants, comma-separated: fa3 (FlashAttention-3's "
              "Hopper forward; its counters and warp stalls, no SASS) [default: none]")
@click.option("--source-stalls", is_flag=True, default=False,
              help="also sample where the warps wait, instruction by instruction (Nsight Compute's SourceCounters): "
              "each launch's SASS page kept as ncu/<variant>-sass.csv.gz, its longest runs of back-to-back "
              "MUFU.EX2 and its opcodes with the most samples in the summary (native runs with ncu)")
@click.option("--ncu/--no-ncu", "use_ncu", default=None,
              help="also read hardware counters with Nsight Compute (one launch per variant) [default: on for "
              "native, off for a cross-compile]")
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
              "[default: FlashAttentionForwardSm for fa4, _attn_fwd for triton]")
@click.option("--warmup", type=WARMUP_CALLS, default=3, show_default=True,
              help="forwards after the compiling one before the profiled launch")
@click.option("--calls", type=click.IntRange(1, MAX_WINDOW_CALLS), default=2, show_default=True,
              help="forwards from the profiled launch on")
@click.option("--seed", type=SEED, default=0, show_default=True, help="input seed")
@click.option("--timeout", "timeout_s", type=Finite(1, MAX_SECONDS, unit="s"), default=600, show_default=True,
              help="seconds allowed to each process (compile and run, under ncu or not)")
@triton_config_option()
@click.option("--out", "out_dir", default="sessions", show_default=True, type=click.Path(file_okay=False))
def command(dtype, seqs, causal, batch, heads, kv_heads, head_dim, backend, variants, arch, references, source_stalls,
            use_ncu, ncu_path,
            collector, counter_reader, cuobjdump_path, kernel_regex, warmup, calls, seed, timeout_s, triton_config,
            out_dir):
    """Audit the compiled attention forward of each variant: SASS instruction counts by opcode family,
    registers, spills, the per-element cost of the exponential path, and (with ncu) pipe utilization,
    issue activity and instructions executed. One session per shape.

    Example: softbench audit --seq 8K --causal --variants A0,A1,noexp

    Without the GPU: softbench audit --arch sm_100a --seq 8K --causal --variants A0,A1,noexp

    softbench's Hopper kernels, without the GPU: softbench audit --backend triton --arch sm_90a --dtype fp8
    --variants A0,h15-folded,noexp

    On the H200, with FA3 beside them: softbench audit --backend triton --dtype fp8 --variants A0,h15-folded
    --reference fa3"""
    from softbench.core.checks import check_memory, check_out_dir
    from softbench.core.console import RichProgress, err, out, table
    from softbench.core.errors import UnsupportedError, UsageError
    from softbench.kernels.capability import detect_device, fa4_fp8_on_hopper, unsupported_reason
    from softbench.audit.cross import (INSTALL_HINT, TRITON_INSTALL_HINT, check_native, check_target, missing_stack,
                                       target_for)
    from softbench.audit.engine import (DEFAULT_KERNEL_REGEX, NCU_WITH_TARGET, AuditOptions, raise_for_failures,
                                        run_audit)
    from softbench.kernels.references import reference_reason
    from softbench.audit.render import audit_markdown, audit_notes, audit_tables

    names = variant_names(variants, backend, example="A0,A1,noexp")
    shapes = shapes_from(dtype, seqs, causal, batch, heads, kv_heads, head_dim)
    check_triton_config(triton_config, backend)
    check_target(backend, arch)
    target = target_for(arch)
    if target is not None and use_ncu:
        raise UsageError(NCU_WITH_TARGET.format(arch=arch))
    use_ncu = target is None if use_ncu is None else use_ncu
    if kernel_regex is not None:
        try:
            re.compile(kernel_regex)
        except re.error as e:  # found only after the compile, it cost seconds and left a partial session
            raise UsageError(f"--kernel-regex {kernel_regex!r} is not a regular expression ({e})") from None
    # the options check the reference names and what they are combined with: bad input, to be heard before
    # whether this machine can run the audit at all
    refs = tuple(r.strip() for r in references.split(",") if r.strip())
    opts = AuditOptions(shapes=shapes, backend=backend, variants=names, arch=arch, references=refs, use_ncu=use_ncu,
                        source_stalls=source_stalls, ncu_path=ncu_path,
                        collector=collector, counter_reader=counter_reader,
                        cuobjdump_path=cuobjdump_path, kernel_regex=kernel_regex or DEFAULT_KERNEL_REGEX[backend],
                        kernel_regex_given=kernel_regex is not None,
                        backend_options=dict(triton_config),
                        warmup=warmup, calls=calls, seed=seed, timeout_s=timeout_s, out_dir=Path(out_dir),
                        command_line="softbench " + " ".join(shlex.quote(a) for a in sys.argv[1:]))
    check_out_dir(out_dir)
    if target is None:  # a cross-compile allocates no inputs (fake tensors) and needs no GPU
        for shape in shapes:
            check_memory(shape, backend)
    else:
        for shape in shapes:  # but its sizes still reach the compiled kernel as 32-bit integers (CuTe's Int32)
            if max(shape.batch, shape.heads, shape.n_kv_heads, shape.seq, shape.head_dim) >= 2 ** 31:
                raise UsageError(f"{shape.tag()}: a size of 2^31 or more does not fit the 32-bit integer the "
                                 "kernel takes it as", hint="use a shorter --seq")
        if (missing := missing_stack(backend)) is not None:
            raise UnsupportedError(missing, hint=TRITON_INSTALL_HINT if backend == "triton" else INSTALL_HINT)
    device = detect_device() if target is None else target.device()
    if target is None:
        check_native(backend, device)
        if device.kind != "cuda":
            # the shared reason (kernels.capability) sends a CPU to --backend sim, which audit does not take: it
            # reads compiled kernels. What does work without a GPU is a cross-compile, so name those instead
            raise UnsupportedError("softbench audit runs FA4 on this machine's CUDA GPU, and none is visible here",
                                   hint="without a GPU, add --arch sm_100a (FA4 compiled here for the B200 and its "
                                        "SASS audited, nothing run), or audit softbench's Hopper kernels with "
                                        "--backend triton --arch sm_90a")
    for shape in shapes:
        reason = unsupported_reason(backend, shape, device, offer_sim=False)  # audit reads compiled kernels
        if reason:
            if target:
                hint = None
            elif backend == "fa4" and fa4_fp8_on_hopper(shape, device):
                hint = ("FA4's FP8 kernel is audited without a B200 with --arch sm_100a (compiled here, its SASS "
                        "read, nothing run)")
            else:
                hint = "the audit reads the kernels FA4 compiles; it needs the GPU they run on"
            raise UnsupportedError(f"{shape.tag()}: {reason}" + (f" (the {arch} target)" if target else ""), hint=hint)
    for shape in shapes:
        for r in opts.references:
            if reason := reference_reason(r, shape, device):
                raise UnsupportedError(f"{shape.tag()}: --reference {r}: {reason}")
    with RichProgress() as progress:
        sessions = run_audit(opts, progress, render_markdown=audit_markdown)
    for s in sessions:
        summary = s.read_json("summary.json")
        for title, columns, rows in audit_tables(summary):
            out.print(table(title, columns, rows))
        for line in audit_notes(summary):
            out.print(line, markup=False)  # notes name variants in brackets, which rich would read as markup
        err.print(f"session: {s.path}")
    raise_for_failures(sessions)

