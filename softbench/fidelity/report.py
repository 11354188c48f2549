"""Printers for fidelity summaries: they read a summary dict and never measure."""

from __future__ import annotations

from softbench.core.tables import md_heading, md_table


def _f(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _native(gate: dict) -> float:
    """The model's own loss of the wiring check (sessions before the eager reference recorded it under SDPA)."""
    return gate.get("native_loss", gate.get("native_sdpa_loss"))


def _resolved(c: dict) -> str:
    """yes / no, or n/a where too few blocks gave no interval (summary.MIN_BLOCKS)."""
    r = c.get("resolved")
    return "n/a" if r is None else ("yes" if r else "no")


def _ci(c: dict, spec: str) -> str:
    if c.get("ci_low") is None:
        return "[no interval]"
    return f"[{_f(c.get('ci_low'), spec)}, {_f(c.get('ci_high'), spec)}]"


def _control(c: dict, spec: str) -> str:
    """The approximation against exact exp2 on the same tiles (summary `control`), '-' where there is none."""
    k = c.get("control")
    if not k:
        return "-"
    return f"{_f(k.get('dnll'), spec)} {_ci(k, spec)}"


def condition_rows(summary: dict) -> list[list[str]]:
    rows = []
    for c in summary.get("conditions", []):
        rows.append([
            c["name"], _f(c.get("dnll"), "+.6f"), _ci(c, "+.6f"),
            _f(c.get("ppl_change_pct"), "+.3f") + "%", _resolved(c), _control(c, "+.6f"),
            _resolved(c["control"]) if c.get("control") else "-",
            f"{c.get('n_lower', 0)}/{c.get('n_blocks', 0)}", _f(c.get("kl_forward"), ".3e"),
            _f(c.get("kl_reverse"), ".3e"), _f(c.get("jsd"), ".3e"), _f(c.get("top1_agreement"), ".4f"),
        ])
    return rows


CONDITION_COLUMNS = ["condition", "dNLL", "95% CI", "PPL change", "resolved", "vs sim:exp2 [95% CI]",
                     "resolved vs sim:exp2", "lower NLL", "KL(base||c)",
                     "KL(c||base)", "JSD", "top-1 agree"]


CONTRAST_COLUMNS = ["a - b", "d(dNLL)", "95% CI", "resolved"]


CONSOLE_COLUMNS = ["condition", "dNLL [95% CI]", "PPL", "resolved", "vs sim:exp2 [95% CI]", "lower", "JSD",
                   "top-1"]


def console_rows(summary: dict) -> list[list[str]]:
    """The few columns a terminal has room for; summary.md has them all."""
    rows = []
    for c in summary.get("conditions", []):
        rows.append([c["name"], f"{_f(c.get('dnll'), '+.5f')} {_ci(c, '+.5f')}",
                     _f(c.get("ppl_change_pct"), "+.3f") + "%", _resolved(c), _control(c, "+.5f"),
                     f"{c.get('n_lower', 0)}/{c.get('n_blocks', 0)}",
                     _f(c.get("jsd"), ".2e"), _f(c.get("top1_agreement"), ".4f")])
    return rows


def headline(summary: dict) -> str:
    base = summary.get("baseline", {})
    if base.get("nll") is None:
        return "no block completed"
    return (f"{summary.get('model', {}).get('label', '?')} on {summary.get('corpus', {}).get('name', '?')}: "
            f"{summary['blocks_complete']} blocks of {summary.get('block_len')} tokens "
            f"({base.get('predictions')} predictions, BOS {summary.get('bos')}); baseline {base['name']} NLL "
            f"{base['nll']:.5f} (PPL {base['ppl']:.4f})")


def interval_note(summary: dict) -> str | None:
    """Why the intervals are missing, when they are."""
    b = summary.get("bootstrap", {})
    if b.get("interval", True) or summary.get("blocks_complete", 0) == 0:
        return None
    return (f"{summary['blocks_complete']} complete block(s): below the {b.get('min_blocks')} that a percentile "
            "bootstrap interval needs, so no interval is given and nothing is called resolved")


def _kernel(summary: dict) -> str:
    """Which kernel produced a kernel-path session's numbers (sessions before --backend existed ran FA4)."""
    if summary.get("path") != "kernel":
        return ""
    ran = sorted(set((summary.get("kernels") or {}).values()))
    return f" (kernel: `{summary.get('backend') or 'fa4'}`" + "".join(f", `{k}`" for k in ran) + ")"


def e4m3_operands(summary: dict) -> bool:
    """Whether an FP8 session's Q, K and V went through E4M3: on the kernel path always (attention.TritonAttention),
    in the simulation where --fp8-operands asked."""
    return summary.get("dtype") == "fp8" and (summary.get("path") == "kernel" or bool(summary.get("fp8_operands")))


def fp8_rounding(summary: dict) -> str:
    """What an FP8 session takes through E4M3 besides FA4's probability offset ('' at another dtype). E4M3
    operands (the kernel path always, attention.TritonAttention; the simulation with --fp8-operands) bring P
    rounded at P.V with them, since P.V reads P in V's dtype (kernels.sim.sim_attention, as the kernel);
    --fp8-storage rounds the weights before the row sums as well. Two FP8 dNLLs are comparable only where this is
    the same: exp2's own moves about tenfold with the operands."""
    if summary.get("dtype") != "fp8":
        return ""
    operands = e4m3_operands(summary)
    rounded = ["Q, K and V, one scale per tensor"] if operands else []
    if summary.get("fp8_storage"):
        rounded.append("P, its row sums included")
    elif operands:
        rounded.append("P at P.V")
    return f"E4M3: {', and '.join(rounded)}" if rounded else "E4M3: neither the operands nor P"


def _fp8(summary: dict) -> str:
    rounding = fp8_rounding(summary)
    return f" ({rounding})" if rounding else ""


def fidelity_markdown(summary: dict) -> str:
    lines = md_heading(f"softbench fidelity: {summary.get('model', {}).get('label', '?')}", summary)
    lines += [f"- {headline(summary)}",
              f"- path: `{summary.get('path')}`{_kernel(summary)}; dtype: `{summary.get('dtype')}`{_fp8(summary)}; "
              f"device: `{summary.get('device')}`; "
              f"rescale threshold tau: {summary.get('rescale_threshold')}; BOS: {summary.get('bos')}"
              + (f" ({summary['bos_note']})" if summary.get("bos_note") else ""),
              f"- token signature (sha256 of the blocks): `{summary.get('token_signature')}`"]
    gate = summary.get("gate")
    if gate:
        lines.append(f"- wiring check on block 0: softbench baseline NLL {gate['softbench_baseline_nll']:.6f} vs the "
                     f"model's own loss ({gate.get('native_attention', 'sdpa')} attention) {_native(gate):.6f} "
                     f"(difference {gate['difference']:+.2e})")
        if "fp8_baseline_nll" in gate:
            lines.append(f"- the wiring checked through the same kernel at `{gate['wiring_dtype']}`; the FP8 forward's "
                         f"baseline NLL on block 0 is {gate['fp8_baseline_nll']:.6f}, "
                         f"{gate['fp8_minus_native']:+.2e} from the model's own loss (E4M3 operands), not checked")
    tc = summary.get("tokenizer_check")
    if tc:
        kept = (f"; {tc['whole_words_kept']} of {tc['whole_words_tried']} corpus words that are vocabulary tokens "
                "kept whole" if tc.get("whole_words_tried") else "")
        lines.append(f"- tokenizer rebuilt from the GGUF by transformers {tc['transformers']}: BOS as the file says "
                     f"(add_bos_token {tc['gguf_add_bos_token']}){kept}")
    note = interval_note(summary)
    if note:
        lines.append(f"- **{note}**")
    for w in summary.get("warnings") or []:
        lines.append(f"- warning: {w}")
    lines += [""] + md_table(CONDITION_COLUMNS, condition_rows(summary))
    notes = [f"- `{c['name']}`: {c['note']}" for c in summary.get("conditions", []) if c.get("note")]
    if notes:
        lines += ["", *notes]
    contrasts = summary.get("contrasts", [])
    if contrasts:
        lines += ["", "Paired contrasts between conditions (same bootstrap indices):", ""]
        lines += md_table(CONTRAST_COLUMNS, [
            [f"{c['a']} - {c['b']}", f"{c['dnll']:+.6f}", _ci(c, "+.6f"), _resolved(c)] for c in contrasts])
    b = summary.get("bootstrap", {})
    lines += ["", f"dNLL: mean over blocks of the per-block NLL difference against the baseline (nats per token); "
              f"{b.get('replicates')} paired block-bootstrap replicates, seed {b.get('seed')}, two-sided "
              f"{int(100 * b.get('level', 0.95))}% percentile interval. PPL change = exp(dNLL) - 1. "
              "Vocabulary-output divergences are averaged over predicted positions. `vs sim:exp2`: the same "
              "per-block difference against the exact-exp2 simulation (same tiles, dtype and rescale rule), the "
              f"approximation without the tiling and storage rounding. Intervals need {b.get('min_blocks')} "
              "complete blocks or more.", ""]
    return "\n".join(lines)
