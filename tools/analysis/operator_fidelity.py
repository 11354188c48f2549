#!/usr/bin/env python3
"""Issue 15's fidelity table: h15-folded's dNLL beside A1's (rowmax-h15), and the other forms', per model, corpus
and path, read from the committed fidelity sessions (no GPU, no model).

    python tools/analysis/operator_fidelity.py [sessions]

One row per model, corpus, path (the kernel path with its backend, or the simulation), device, dtype, block length
and rescale threshold: the settings under which two dNLLs are comparable. The model is named by its GGUF file where
it has one and the corpus by its text's hash (the `smollm2-135m` alias and the GGUF it resolves to are one model,
`austen` and `austen.txt` one text). Each cell is that condition's dNLL against exact attention with its paired
block-bootstrap 95% interval (softbench.report.fidelity_match reads them), from the session with the most complete
blocks (then a complete one, then one holding A1 and h15-folded both, then the newest, so that a rerun supersedes);
a partial session says how many blocks it holds. The kernel path runs one operator per
session, so a row's cells may come from several sessions, which the last column names. "h15-folded - A1" is the
paired contrast of the two (same blocks, same bootstrap indices): from the session that holds both, or from two
sessions whose blocks are the same tokens (one token signature) and whose baselines agree bit for bit on every
block both hold, as two kernel-path runs of the same stock kernel do; their rows on those blocks are then
summarized together by the fidelity command's own statistics (softbench.fidelity.summary), which give an
interval from 20 blocks on. Elsewhere it is left out (n/a)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout

from softbench.predictions.sessions import SessionRecord, load_sessions  # noqa: E402
from softbench.fidelity.engine import ROWS_FILE  # noqa: E402
from softbench.fidelity.report import e4m3_operands  # noqa: E402
from softbench.fidelity.summary import summarize  # noqa: E402
from softbench.report.fidelity_match import FidelityPoint, fidelity_points  # noqa: E402
from softbench.report.records import raw_records  # noqa: E402

# the operators issue 15 asks about, in the table's order: A1, the two-instruction form, the saturating form, the
# hybrids, and the exact-exp2 control of the simulation
COLUMNS = (("rowmax-h15", "A1 (rowmax-h15)"), ("rowmax-h15-folded", "h15-folded"), ("rowmax-h15-sat", "h15-sat"),
           ("rowmax-h15-1of4", "h15-1of4"), ("rowmax-h15-1of2", "h15-1of2"), ("exp2", "exact-exp2 control"))
A1, FOLDED = COLUMNS[0][0], COLUMNS[1][0]


@dataclass(frozen=True)
class Setting:
    """What two fidelity conditions must share for their dNLLs to be compared."""
    model: str
    corpus: str
    path: str
    device: str
    dtype: str
    block_len: int
    rescale_threshold: float


def model_name(summary: dict) -> str:
    model = summary.get("model") or {}
    if not isinstance(model, dict):
        return str(model)
    gguf = model.get("gguf_file")
    return Path(gguf).stem if gguf else str(model.get("label") or model.get("alias") or "?")


def corpus_names(records: list[SessionRecord]) -> dict[str, str]:
    """Each corpus text's hash -> one name for it (the shortest recorded, without its extension)."""
    names: dict[str, str] = {}
    for r in records:
        corpus = r.summary.get("corpus") or {}
        if isinstance(corpus, dict) and corpus.get("text_sha256"):
            name = Path(str(corpus.get("name") or "?")).stem
            known = names.get(corpus["text_sha256"])
            names[corpus["text_sha256"]] = min(name, known, key=len) if known else name
    return names


def setting(r: SessionRecord, corpora: dict[str, str], point: FidelityPoint) -> Setting:
    s = r.summary
    corpus = s.get("corpus") or {}
    text = corpus.get("text_sha256") if isinstance(corpus, dict) else None
    device = str(s.get("device", "?"))
    path = point.path
    if path == "kernel":  # without CUDA the kernel path runs only through Triton's interpreter (kernel_worker)
        path = f"kernel ({point.backend}{', interpreter' if device == 'cpu' else ''})"
    return Setting(model_name(s), corpora.get(text, point.corpus), path, device, dtype_label(s, point),
                   int(s.get("block_len") or 0), float(s.get("rescale_threshold") or 0.0))


def dtype_label(summary: dict, point: FidelityPoint) -> str:
    """The dtype, and at FP8 what went through E4M3 besides FA4's probability offset, which changes the condition:
    the operands (softbench.fidelity.report.e4m3_operands; P.V then reads E4M3 P) and P before the row sums (the
    simulation's --fp8-storage)."""
    if point.dtype != "fp8":
        return point.dtype
    rounded = [what for what, on in (("E4M3 Q/K/V", e4m3_operands(summary)), ("E4M3 P", summary.get("fp8_storage")))
               if on]
    return ", ".join([point.dtype, *rounded])


def blocks(r: SessionRecord) -> tuple[int, int]:
    s = r.summary
    return int(s.get("blocks_complete") or 0), int(s.get("blocks_planned") or 0)


def nats(dnll: float, low: float, high: float) -> str:
    """+0.00260 [+0.00091, +0.00428]: a dNLL in nats per token and its 95% interval, as every cell prints one."""
    return f"{dnll:+.5f} [{low:+.5f}, {high:+.5f}]"


def reversed_pair(c: dict) -> str:
    """b - a from a contrast recorded as a - b (softbench.fidelity.summary): the estimate negated, its interval
    flipped."""
    return nats(-c["dnll"], -c["ci_high"], -c["ci_low"])


def cell(point: FidelityPoint, r: SessionRecord) -> str:
    done, planned = blocks(r)
    partial = "" if r.complete else f" (partial, {done} of {planned} blocks)"
    return nats(point.dnll, point.ci_low, point.ci_high) + partial


def contrast(r: SessionRecord, a: str, b: str) -> str | None:
    """b - a in session r, from its paired contrasts, or None where it holds no such pair. A session records each
    pair once, first - second in the order its operators were given: a - b, which is reversed here, or b - a."""
    for c in r.summary.get("contrasts") or []:
        names = (c.get("a", "").split(":")[-1], c.get("b", "").split(":")[-1])
        if names in ((a, b), (b, a)) and all(isinstance(c.get(k), (int, float)) for k in ("dnll", "ci_low", "ci_high")):
            return reversed_pair(c) if names == (a, b) else nats(c["dnll"], c["ci_low"], c["ci_high"])
    return None


def baseline_name(r: SessionRecord) -> str | None:
    base = r.summary.get("baseline")
    return base.get("name") if isinstance(base, dict) else None


def paired_across(ra: SessionRecord, a: FidelityPoint, rb: SessionRecord, b: FidelityPoint) -> str | None:
    """b - a from two sessions on the same blocks with bit-equal baselines (see the module's doc), or None."""
    base = baseline_name(ra)
    if (base is None or base != baseline_name(rb) or not ra.summary.get("token_signature")
            or ra.summary.get("token_signature") != rb.summary.get("token_signature")):
        return None
    rows_a, rows_b = raw_records(ra, ROWS_FILE), raw_records(rb, ROWS_FILE)
    base_a = {row["block"]: row["nll"] for row in rows_a if row["condition"] == base}
    base_b = {row["block"]: row["nll"] for row in rows_b if row["condition"] == base}
    common = base_a.keys() & base_b.keys()  # a partial session holds fewer blocks: compare on those both hold
    if not common or any(base_a[k] != base_b[k] for k in common):
        return None
    rows = [row for row in rows_a if row["block"] in common] + [
        row for row in rows_b if row["condition"] == b.condition and row["block"] in common]
    conditions = [{"name": base}, {"name": a.condition}, {"name": b.condition}]
    summary = summarize(rows, conditions, **_bootstrap(ra))
    (pair,) = summary["contrasts"]  # a - b
    if pair.get("ci_low") is None:
        return None
    return f"{reversed_pair(pair)} (two sessions, {pair['n_blocks']} blocks)"


def _bootstrap(r: SessionRecord) -> dict:
    """The session's own bootstrap settings, so that the pair is drawn as its intervals were."""
    b = r.summary.get("bootstrap") or {}
    return {"n_boot": int(b.get("replicates", 5000)), "seed": int(b.get("seed", 0)),
            "level": float(b.get("level", 0.95))}


def table(folder: Path) -> str:
    records = [r for r in load_sessions([folder]) if r.command == "fidelity"]
    by_name = {r.name: r for r in records}
    corpora = corpus_names(records)
    points = fidelity_points(records)
    pairs = {p.session for p in points if p.operator == A1} & {p.session for p in points if p.operator == FOLDED}

    def rank(r: SessionRecord) -> tuple:
        # more complete blocks first, then a complete session, then one that holds A1 and h15-folded both (its
        # contrast is paired), then the newest (a rerun supersedes)
        return blocks(r)[0], r.complete, r.name in pairs, r.started.timestamp() if r.started else 0.0, r.name

    best: dict[tuple[Setting, str], FidelityPoint] = {}
    for point in points:
        key = (setting(by_name[point.session], corpora, point), point.operator)
        if key not in best or rank(by_name[point.session]) > rank(by_name[best[key].session]):
            best[key] = point
    settings = sorted({k[0] for k in best if k[1] in (A1, FOLDED)},
                      key=lambda s: (s.model, s.corpus, s.dtype, s.path, s.device, s.block_len, s.rescale_threshold))
    header = ("| model | corpus | path | device | dtype | tokens per block | "
              + " | ".join(title for _, title in COLUMNS) + " | h15-folded - A1 (paired) | sessions |")
    lines = [header, "|" + " --- |" * (header.count("|") - 1)]
    for st in settings:
        row = {op: best.get((st, op)) for op, _ in COLUMNS}
        cells = [cell(p, by_name[p.session]) if p else "not run" for p in row.values()]
        paired = None
        if row[A1] and row[FOLDED]:
            ra, rf = by_name[row[A1].session], by_name[row[FOLDED].session]
            paired = contrast(ra, A1, FOLDED) if ra is rf else paired_across(ra, row[A1], rf, row[FOLDED])
        tau = f", tau {st.rescale_threshold:g}" if st.rescale_threshold else ""
        used = sorted({p.session[:16] for p in row.values() if p})
        lines.append(f"| {st.model} | {st.corpus} | {st.path} | {st.device} | {st.dtype}{tau} | {st.block_len} | "
                     + " | ".join(cells) + f" | {paired or 'n/a'} | " + ", ".join(f"`{u}`" for u in used) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sessions", nargs="?", default="sessions", type=Path)
    args = parser.parse_args(argv)
    if not args.sessions.is_dir():
        print(f"{args.sessions} is not a folder of sessions", file=sys.stderr)
        return 2
    print(table(args.sessions))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
