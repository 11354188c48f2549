"""Statistics of a fidelity session: pure functions from per-block rows to the summary (paper A.2, A.9, C.4).

Per condition c and block b: dNLL_b = NLL_b,c - NLL_b,baseline. The estimate is the mean over blocks; its 95%
interval is the two-sided percentile interval of 5,000 paired block-bootstrap replicates (seed 0), drawn ONCE
and reused for every condition and contrast (softbench.core.stats.bootstrap_indices). Perplexity change is
exp(dNLL) - 1; a contrast is resolved when its interval excludes zero; n_lower counts the blocks where the
condition's NLL is below the baseline's. Vocabulary-output divergences are averaged over predicted positions.
Only blocks that every condition completed enter the statistics.

Below MIN_BLOCKS complete blocks no interval is given and nothing is called resolved (ci_low, ci_high and
resolved are None): the estimate and the per-block counts are still reported.

Each tile-wise simulated operator is also put against the control (sim:exp2: exact exp2 on the same tiles, the
same dtype and the same rescale rule; the condition whose role is "control"), its `control` entry: the approximation's own effect, without the
tiling and storage rounding that the headline against exact attention also contains."""

from __future__ import annotations

import csv
import io
import itertools
import math

import numpy as np

from softbench.core.errors import UsageError
from softbench.core.numbers import finite
from softbench.core.stats import bootstrap_indices, paired_block_bootstrap
from softbench.fidelity.limits import MIN_BLOCKS

VOCAB_METRICS = ("kl_forward", "kl_reverse", "jsd", "top1_agreement")


def check_rows(rows: list[dict], source: str) -> None:
    """Refuse the recorded rows of a session (blocks.jsonl, `source`) where one is not what the engine writes: a
    resumed run would otherwise carry a NaN or a string into a summary it marks complete."""
    for r in rows:
        block, condition = r.get("block"), r.get("condition")
        where = f"{source}: the row of block {block!r}, condition {condition!r}"
        if type(block) is not int or block < 0 or not isinstance(condition, str):
            raise UsageError(f"{where} has no block number and condition name as the engine writes them")
        if type(r.get("n_tokens")) is not int or r["n_tokens"] < 1:
            raise UsageError(f"{where} has n_tokens {r.get('n_tokens')!r}, not a positive whole number")
        for key in ("nll", *(k for k in VOCAB_METRICS if k in r)):
            if finite(r.get(key)) is None:
                raise UsageError(f"{where} has {key} {r.get(key)!r}, not a finite number",
                                 hint="the session's recorded blocks are damaged; start a new session")


def latest_rows(rows: list[dict]) -> dict[tuple[int, str], dict]:
    """(block, condition) -> the last row written for it (a resumed run may have redone a block)."""
    out: dict[tuple[int, str], dict] = {}
    for r in rows:
        out[(int(r["block"]), r["condition"])] = r
    return out


def complete_blocks(table: dict[tuple[int, str], dict], names: list[str]) -> list[int]:
    blocks = sorted({b for b, _ in table})
    return [b for b in blocks if all((b, n) in table for n in names)]


def _pct(x: float) -> float:
    return 100.0 * math.expm1(x)


def _weighted(table, blocks, name, key) -> float | None:
    rows = [table[(b, name)] for b in blocks]
    if not rows or any(r.get(key) is None for r in rows):
        return None
    n = np.array([r["n_tokens"] for r in rows], dtype=np.float64)
    v = np.array([r[key] for r in rows], dtype=np.float64)
    return float((v * n).sum() / n.sum())


def _contrast(d: np.ndarray, idx: np.ndarray | None, n_boot: int, seed: int, level: float) -> dict:
    """Mean per-block difference; with `idx` (MIN_BLOCKS or more blocks) also its interval and resolution."""
    out = {"dnll": float(d.mean()), "ppl_change_pct": _pct(float(d.mean())), "n_lower": int((d < 0).sum()),
           "n_equal": int((d == 0).sum()), "n_blocks": int(d.size)}
    if idx is None:
        return {**out, "ci_low": None, "ci_high": None, "resolved": None, "ppl_change_ci_pct": None}
    pb = paired_block_bootstrap(d, n_boot=n_boot, seed=seed, level=level, indices=idx)
    return {**out, "ci_low": pb.ci_low, "ci_high": pb.ci_high, "resolved": pb.resolved,
            "ppl_change_ci_pct": [_pct(pb.ci_low), _pct(pb.ci_high)]}


def summarize(rows: list[dict], conditions: list[dict], n_boot: int = 5000, seed: int = 0,
              level: float = 0.95) -> dict:
    """`conditions`: Condition.describe() dicts, baseline first."""
    names = [c["name"] for c in conditions]
    table = latest_rows(rows)
    blocks = complete_blocks(table, names)
    base = names[0]
    out: dict = {"blocks_complete": len(blocks), "block_ids": blocks,
                 "bootstrap": {"replicates": n_boot, "seed": seed, "level": level, "min_blocks": MIN_BLOCKS,
                               "interval": len(blocks) >= MIN_BLOCKS, "method": "paired block bootstrap, "
                               "percentile interval, indices shared by every condition"}}
    if not blocks:
        out.update(baseline={"name": base}, conditions=[], contrasts=[])
        return out
    nll = {n: np.array([table[(b, n)]["nll"] for b in blocks], dtype=np.float64) for n in names}
    tokens = int(sum(table[(b, base)]["n_tokens"] for b in blocks))
    base_nll = _weighted(table, blocks, base, "nll")
    out["baseline"] = {**conditions[0], "nll": base_nll, "ppl": math.exp(base_nll), "predictions": tokens}
    idx = bootstrap_indices(len(blocks), n_boot, seed) if len(blocks) >= MIN_BLOCKS else None
    control = next((c["name"] for c in conditions if c.get("role") == "control"), None)
    conds = []
    for c in conditions[1:]:
        n = c["name"]
        entry = {**c, "nll": _weighted(table, blocks, n, "nll"),
                 **_contrast(nll[n] - nll[base], idx, n_boot, seed, level)}
        for key in VOCAB_METRICS:
            entry[key] = _weighted(table, blocks, n, key)
        if control and c.get("path") == "sim" and n != control:
            entry["control"] = {"name": control, **_contrast(nll[n] - nll[control], idx, n_boot, seed, level)}
        conds.append(entry)
    out["conditions"] = conds
    out["contrasts"] = [{"a": a, "b": b, **_contrast(nll[a] - nll[b], idx, n_boot, seed, level)}
                        for a, b in itertools.combinations(names[1:], 2)]
    return out


CSV_COLUMNS = ("block", "condition", "nll", "n_tokens", "dnll", *VOCAB_METRICS, "seconds")


def blocks_csv(rows: list[dict], names: list[str]) -> str:
    """One line per (block, condition), blocks in order, conditions in `names` order (the baseline first);
    dnll against the same block's baseline where that is recorded."""
    baseline = names[0]
    order = {n: i for i, n in enumerate(names)}
    table = latest_rows(rows)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for (b, n), r in sorted(table.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], len(order)), kv[0][1])):
        base = table.get((b, baseline))
        d = dict(r)
        d["dnll"] = (r["nll"] - base["nll"]) if base is not None and n != baseline else None
        w.writerow(["" if d.get(c) is None else (repr(float(d[c])) if isinstance(d[c], float) else d[c])
                    for c in CSV_COLUMNS])
    return buf.getvalue()
