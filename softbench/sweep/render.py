"""Printers for sweeps: the emulation settings (dry run) and a sweep's sorted result table. Read-only."""

from __future__ import annotations

from softbench.core.tables import fmt, md_heading, md_table


def settings_rows(settings: list[dict]) -> list[list[str]]:
    """settings: EmulationSetting.to_dict() records, plus an optional short 'patch_check' word."""
    rows = []
    for s in settings:
        paper = s.get("paper_beta_pct")
        if paper is None:
            paper_cell = "-"
        else:
            paper_cell = f"{paper:g}%" + ("" if abs(paper - s["beta_pct"]) < 1e-9 else " (differs)")
        rows.append([s["description"], f"{s['beta_pct']:g}%", paper_cell, s["variant"], s.get("patch_check", "-")])
    return rows


SETTINGS_COLUMNS = ["setting", "beta (FA4 predicate)", "beta (paper)", "variant", "patch"]


def sweep_rows(summary: dict, wide: bool = True) -> list[list[str]]:
    """One row per variant, fastest first. `wide` adds the description and the session (Markdown);
    the console table leaves them out."""
    rows = []
    for r in summary.get("rows", []):
        beta = r.get("beta_pct")
        head = [r["variant"]] + ([r.get("description", "")] if wide else []) + ["-" if beta is None else f"{beta:g}%"]
        if r.get("error"):
            rows.append(head + ["failed", "-", "-", "-"] + ([r["error"][:120]] if wide else []))
            continue
        ci = r.get("ci95_pct")
        interval = f" [{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci and ci[0] == ci[0] else ""
        rows.append(head + [fmt(r.get("speedup_pct"), "+.2f") + "%" + interval, fmt(r.get("per_round_sd_pp"), ".2f"),
                            fmt(r.get("baseline_median_ms"), ".4f"), fmt(r.get("variant_median_ms"), ".4f")]
                    + ([r.get("session", "")] if wide else []))
    return rows


SWEEP_COLUMNS = ["variant", "what", "beta", "speed-up vs baseline", "per-round sd (pp)", "baseline ms",
                 "variant ms", "session / error"]
SWEEP_COLUMNS_NARROW = ["variant", "beta", "speed-up", "sd (pp)", "baseline ms", "variant ms"]


def sweep_markdown(summary: dict, title: str) -> str:
    lines = md_heading(title, summary)
    together = summary.get("protocol_kind") in ("interleaved", "sustained")
    lines += [
        f"- kind: {summary.get('kind')}; backend `{summary.get('backend')}`; shape `{summary.get('shape_tag')}`",
        f"- baseline: {summary.get('baseline')} " + ("(every variant in one run with it)" if together else
                                                     "(one process kept for the whole sweep; one process per variant)"),
        f"- protocol{'' if together else ' per variant'}: {summary.get('protocol')}",
    ]
    if together:
        lines.append(f"- quantity: speed-up {summary.get('quantity')} ({summary.get('protocol_kind')} protocol)")
    lines += [""] + md_table(SWEEP_COLUMNS, sweep_rows(summary), bar="/")
    if together:
        lines += ["", "Sorted by speed-up, fastest first. Speed-up and its 95% interval are over the pairs of the one "
                  "latency session that measured every kernel together.", ""]
    else:
        lines += ["", "Sorted by speed-up, fastest first. Speed-up = 100 (median baseline / median variant - 1) over "
                  "pooled windows of that variant's own session; baselines of different rows are different windows "
                  "of the same baseline process.", ""]
    if summary.get("kind") == "emulation":
        lines += ["beta = share of exponentials FA4 computes with its polynomial instead of MUFU ex2, from FA4's "
                  "predicate (hardware iff k % freq < freq - res or j >= frg_cnt - 1 or j < start_frg).", ""]
    return "\n".join(lines)
