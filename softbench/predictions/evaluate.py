"""Score sealed predictions against recorded sessions: met, failed or unverified, with the evidence named.

Pure functions over session records; nothing here measures or prints.

Rules (also in the command's help):
- A session is in a prediction's scope when every scope key matches one of its facts: `command`, `backend`,
  `baseline`, `variant` (protocol.yaml's variant names first, then summary.json), the shape fields (`dtype`, `seq`,
  `causal`, `head_dim`, `batch`, `heads`, `kv_heads`, from the summary's or protocol's `shape`), any other
  top-level scalar of summary.json, or a dotted path into summary.json then protocol.yaml. A `backend_options.<field>`
  that the run did not name (a run of the backend's defaults records none) is read from the configuration the
  baseline's worker resolved and reported (summary.json's smoke.<baseline>.build_info.config). A list in the scope
  means "any of". A session lacking a scope key is out of scope.
- A session supplies evidence kind K when K is its command, K is listed in summary.json's `evidence`, or
  summary.json holds a non-empty value under K (an audit summary with an `ncu` block supplies `ncu`).
- Pre-registration: with the seal's time given (the command always gives it), a session in scope counts only
  when it started after the seal: its earliest recorded time (protocol.yaml's started_utc, env.json's
  recorded_utc, the UTC stamp that starts its folder name) must not be before sealed_utc. Earlier sessions, and
  sessions with no recorded time, are listed as excluded with the reason. A prediction's `until` closes its
  window: a session that started at or after it is excluded as well, with the reason.
- Provenance: scope keys naming the code or the protocol that ran (`source_sha256`, `git_commit` from env.json,
  `protocol.<field>`) are checked after the others; a session that matches everything else but differs there
  is listed as excluded with what it recorded, not silently dropped.
- Partial sessions (status.json complete other than true) are skipped unless asked for, and are labelled when used.
- Each in-scope session with the evidence and a numeric value is scored on its own; a prediction is met only
  when it holds in every such session, failed when it fails in any, and unverified when none gives a value.
- Deviations record what did not go as planned: in scope but evidence or quantity missing, values that are not
  numbers, partial sessions skipped or used."""

from __future__ import annotations

import datetime as _dt
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from softbench.core.errors import UsageError
from softbench.core.numbers import finite
from softbench.core.stats import change_pct
from softbench.core.utc import parse_utc, utc_iso
from softbench.predictions.sessions import SessionRecord
from softbench.predictions.vocabulary import PROVENANCE_KEYS

MET, FAILED, UNVERIFIED = "met", "failed", "unverified"


# --- looking things up ----------------------------------------------------------------------------------

_MISSING = object()


def resolve(data: Any, path: str) -> Any:
    """Follow a dotted path through mappings (and lists, by index); _MISSING where it leads nowhere."""
    cur = data
    for part in path.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.lstrip("-").isdigit() and -len(cur) <= int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return _MISSING
    return cur


def _same(a: Any, b: Any) -> bool:
    # True == 1 in Python; a scope asking for causal: true must not match a count of 1
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return a == b


def is_provenance(key: str) -> bool:
    """Scope keys that name the code or the protocol that ran rather than what was measured."""
    return key in PROVENANCE_KEYS or key == "protocol" or key.startswith("protocol.")


def _scope_value(key: str, rec: SessionRecord) -> Any:
    """What the session records under a scope key: a fact, else a dotted path into summary.json, then
    protocol.yaml; _MISSING where it records nothing."""
    have = rec.facts.get(key, _MISSING) if "." not in key else _MISSING
    if have is _MISSING:
        have = resolve(rec.summary, key)
    if have is _MISSING:
        have = resolve(rec.protocol, key)
    if have is _MISSING and key.startswith("backend_options."):
        have = resolved_option(key.removeprefix("backend_options."), rec)
    return have


def resolved_option(field: str, rec: SessionRecord) -> Any:
    """A kernel option the run left to the backend's defaults, as its baseline's worker resolved it (the Gluon
    label of the FP8 default, and each of its fields). The baseline's is the session's configuration: its null runs
    the same, and only --variant-config gives the variants another (scope `smoke.<variant>.build_info.config...`)."""
    return kernel_option(rec.facts.get("baseline"), field, rec)


def kernel_option(kernel: Any, field: str, rec: SessionRecord) -> Any:
    """A kernel option as the worker of the kernel labelled `kernel` built it; _MISSING where it reported none."""
    if not isinstance(kernel, str):
        return _MISSING
    return resolve(rec.summary, f"smoke.{kernel}.build_info.config.{field}")


def _matches(have: Any, want: Any) -> bool:
    return any(_same(have, w) for w in (want if isinstance(want, list) else [want]))


def _first_mismatch(scope: dict, rec: SessionRecord) -> tuple[str, Any] | None:
    """(key, what the session records there, _MISSING if nothing) for the first scope key it does not match."""
    for key, want in scope.items():
        have = _scope_value(key, rec)
        if have is _MISSING or not _matches(have, want):
            return key, have
    return None


def scope_mismatch(scope: dict, rec: SessionRecord) -> str | None:
    """None when the session is in scope, else the first key that does not match (for the record)."""
    miss = _first_mismatch(scope, rec)
    if miss is None:
        return None
    key, have = miss
    return f"{key} absent" if have is _MISSING else f"{key}={have!r}"


def _value_of(rec: SessionRecord, path: str) -> tuple[float | None, str | None]:
    """(value, problem): the number at `path` in the summary, or why there is none."""
    v = resolve(rec.summary, path)
    if v is _MISSING or v is None:
        return None, f"quantity {path} missing"
    n = finite(v)
    if n is None:
        return None, f"quantity {path} is not a finite number ({v!r})"
    return n, None


def measured_value(pred: dict, rec: SessionRecord) -> tuple[float | None, str | None]:
    value, problem = _value_of(rec, pred["quantity"])
    if problem or "relative_to" not in pred:
        return value, problem
    ref, problem = _value_of(rec, pred["relative_to"])
    if problem:
        return None, problem
    if ref == 0:
        return None, f"relative_to {pred['relative_to']} is zero"
    return change_pct(value, ref), None


def threshold_values(pred: dict, rec: SessionRecord) -> tuple[list[float] | None, str | None]:
    raw = pred["threshold"] if isinstance(pred["threshold"], list) else [pred["threshold"]]
    out = []
    for b in raw:
        if isinstance(b, dict):
            v, problem = _value_of(rec, b["quantity"])
            if problem:
                return None, f"threshold {problem}"
            out.append(v)
        else:
            out.append(float(b))
    return out, None


def holds(value: float, comparator: str, bounds: list[float]) -> bool:
    """Between is inclusive at both ends; outside is its complement."""
    if comparator == ">":
        return value > bounds[0]
    if comparator == ">=":
        return value >= bounds[0]
    if comparator == "<":
        return value < bounds[0]
    if comparator == "<=":
        return value <= bounds[0]
    lo, hi = min(bounds), max(bounds)
    inside = lo <= value <= hi
    if comparator == "between":
        return inside
    if comparator == "outside":
        return not inside
    raise UsageError(f"unknown comparator {comparator!r}")


def describe_condition(pred: dict) -> str:
    def b(x):
        return x["quantity"] if isinstance(x, dict) else f"{x:g}"

    q = pred["quantity"] + (f" vs {pred['relative_to']} (% change)" if "relative_to" in pred else "")
    t = pred["threshold"]
    if pred["comparator"] in ("between", "outside"):
        cond = f"{q} {pred['comparator']} [{b(t[0])}, {b(t[1])}]"
    else:
        cond = f"{q} {pred['comparator']} {b(t)}"
    return cond + (f"; sessions started before {pred['until']}" if pred.get("until") else "")


# --- scoring --------------------------------------------------------------------------------------------

@dataclass
class Evidence:
    session: str
    value: float
    bounds: list[float]
    outcome: str
    partial: bool
    gpu: str = ""  # the board the session ran on (env.json's gpu name); '' where it records none


@dataclass
class Deviation:
    prediction: str
    session: str
    kind: str
    detail: str


@dataclass
class Exclusion:
    """A session that the scope would take but that may not count: started before the seal, or recorded
    another source hash or protocol than the scope names."""

    prediction: str
    session: str
    reason: str


@dataclass
class Verdict:
    id: str
    statement: str
    condition: str
    evidence_kinds: list[str]
    verdict: str
    reason: str
    evidence: list[Evidence] = field(default_factory=list)


@dataclass
class Evaluation:
    predictions: list[Verdict]
    deviations: list[Deviation]
    sessions: list[dict]
    include_partial: bool
    excluded: list[Exclusion] = field(default_factory=list)
    sealed_utc: str | None = None

    def counts(self) -> dict:
        c = {MET: 0, FAILED: 0, UNVERIFIED: 0}
        for v in self.predictions:
            c[v.verdict] += 1
        return c

    def to_dict(self) -> dict:
        return {"predictions": [asdict(v) for v in self.predictions],
                "deviations": [asdict(d) for d in self.deviations], "sessions": self.sessions,
                "excluded": [asdict(x) for x in self.excluded], "include_partial": self.include_partial,
                "counts": self.counts()}


def exclusion_reason(scope: dict, rec: SessionRecord, sealed: _dt.datetime | None,
                     until: _dt.datetime | None = None) -> str | None:
    """Why a session that the measured part of the scope takes may still not count; None when it counts. Every
    reason that applies is given, the provenance first: a session from another board or source stays out whenever
    it ran, so "before the seal" alone would understate why."""
    reasons = []
    miss = _first_mismatch({k: v for k, v in scope.items() if is_provenance(k)}, rec)
    if miss is not None:
        key, have = miss
        reasons.append(f"records no {key}, which the scope names ({scope[key]!r})" if have is _MISSING
                       else f"recorded {key}={have!r}, the scope names {scope[key]!r}")
    if sealed is not None:
        if rec.started is None:
            reasons.append("records no start time, so it cannot be shown to have started after the seal")
        elif rec.started < sealed:
            reasons.append(f"started {utc_iso(rec.started)}, before the seal ({utc_iso(sealed)})")
    if until is not None and rec.started is not None and rec.started >= until:
        reasons.append(f"started {utc_iso(rec.started)}, after the prediction's window (until {utc_iso(until)})")
    return "; ".join(reasons) or None


def baseline_not_exact(rec: SessionRecord) -> str | None:
    """For a latency session whose baseline's error against FP32 is well above the exact reference's
    (softbench.latency.exactness; read from the smoke checks where summary.json predates the check), the warning;
    else None."""
    if rec.command != "latency":
        return None
    from softbench.latency.exactness import exactness_line, recorded_exactness

    check = recorded_exactness(rec.summary)
    return exactness_line(check) if check and not check["ok"] else None


def _score(pred: dict, records: list[SessionRecord], include_partial: bool, deviations: list[Deviation],
           excluded: list[Exclusion], sealed: _dt.datetime | None) -> Verdict:
    pid = pred["id"]
    verdict = Verdict(id=pid, statement=pred["statement"], condition=describe_condition(pred),
                      evidence_kinds=list(pred["evidence"]), verdict=UNVERIFIED, reason="")
    measured_scope = {k: v for k, v in pred["scope"].items() if not is_provenance(k)}
    misses = Counter()
    in_scope = []
    n_excluded = 0
    until = parse_utc(pred.get("until"))
    for r in records:
        miss = scope_mismatch(measured_scope, r)
        if miss is not None:
            misses[miss] += 1
            continue
        why = exclusion_reason(pred["scope"], r, sealed, until)
        if why is None:
            in_scope.append(r)
        else:
            excluded.append(Exclusion(pid, r.name, why))
            n_excluded += 1
    if not in_scope:
        # the commonest mismatches show whether the evidence was never recorded or the scope has a typo
        seen = "; ".join(f"{m} ({n})" for m, n in misses.most_common(3))
        verdict.reason = (f"no session in scope, so no {', '.join(pred['evidence'])} evidence"
                          + (f"; {n_excluded} excluded (see excluded)" if n_excluded else "")
                          + (f"; out of scope: {seen}" if seen else "" if n_excluded else "; no sessions read"))
        return verdict
    usable = []
    for r in in_scope:
        if not r.complete and not include_partial:
            deviations.append(Deviation(pid, r.name, "partial-skipped",
                                        "in scope but partial; pass --include-partial to use it"))
        else:
            usable.append(r)
    if not usable:
        verdict.reason = f"only partial sessions in scope ({len(in_scope)}), not used"
        return verdict
    with_evidence = []
    for r in usable:
        missing = [k for k in pred["evidence"] if not r.supplies(k)]
        if missing:
            deviations.append(Deviation(pid, r.name, "evidence-missing",
                                        f"in scope but supplies no {', '.join(missing)} evidence"))
        else:
            with_evidence.append(r)
    if not with_evidence:
        verdict.reason = (f"no session in scope supplies {', '.join(pred['evidence'])} evidence "
                          f"({len(usable)} in scope without it)")
        return verdict
    for r in with_evidence:
        value, problem = measured_value(pred, r)
        bounds, bproblem = threshold_values(pred, r) if problem is None else (None, None)
        problem = problem or bproblem
        if problem:
            deviations.append(Deviation(pid, r.name, "quantity-missing", f"in scope but {problem}"))
            continue
        if not r.complete:
            deviations.append(Deviation(pid, r.name, "partial-used", "partial session used (--include-partial)"))
        inexact = baseline_not_exact(r)
        if inexact:  # the verdict stands as sealed; the evidence carries the caveat
            deviations.append(Deviation(pid, r.name, "baseline-not-exact", inexact))
        verdict.evidence.append(Evidence(session=r.name, value=value, bounds=bounds,
                                         outcome=MET if holds(value, pred["comparator"], bounds) else FAILED,
                                         partial=not r.complete, gpu=r.board))
    ev = verdict.evidence
    if not ev:
        verdict.reason = f"{len(with_evidence)} session(s) in scope, none holds the quantity"
        return verdict
    pooled = boards_pooled(ev)
    if pooled:  # the verdict stands as sealed; the reader sees that it rests on more than one board
        deviations.append(Deviation(pid, "*", "boards-pooled", pooled))
    n_met = sum(e.outcome == MET for e in ev)
    partial_note = f"; {sum(e.partial for e in ev)} of them partial" if any(e.partial for e in ev) else ""
    if n_met == len(ev):
        verdict.verdict = MET
        verdict.reason = (f"holds in the only session in scope{partial_note}" if len(ev) == 1 else
                          f"holds in all {len(ev)} sessions in scope (met only if all hold){partial_note}")
    else:
        verdict.verdict = FAILED
        verdict.reason = (f"fails in {len(ev) - n_met} of {len(ev)} session(s) in scope "
                          f"(met only if all hold){partial_note}")
    return verdict


def boards_pooled(evidence: list[Evidence]) -> str | None:
    """A sentence where one prediction's evidence comes from more than one board, else None. A scope that names
    only gpu_capability takes an H100's sessions beside an H200's (both 9.0), whose memory and clocks differ."""
    counts = Counter(e.gpu or "no GPU recorded" for e in evidence)
    if len(counts) < 2:
        return None
    listed = ", ".join(f"{board} ({n})" for board, n in sorted(counts.items()))
    return f"evidence from {len(counts)} boards: {listed}; the scope names no gpu_name, so it pools them"


def evaluate(content: dict, records: list[SessionRecord], include_partial: bool = False,
             sealed_utc: str | None = None) -> Evaluation:
    """Score every prediction of a verified sealed content against session records. With `sealed_utc` (the
    seal's time, ISO 8601), only sessions started after it count."""
    sealed = None
    if sealed_utc is not None:
        sealed = parse_utc(sealed_utc)
        if sealed is None:
            raise UsageError(f"the seal's time {sealed_utc!r} is not an ISO 8601 time, so no session can be "
                             "shown to come after it")
    deviations = [Deviation("*", r.name, "session-unreadable", "; ".join(r.problems)) for r in records if r.problems]
    excluded: list[Exclusion] = []
    verdicts = [_score(p, records, include_partial, deviations, excluded, sealed) for p in content["predictions"]]
    sessions = [{"session": r.name, "command": r.command, "complete": r.complete, "problems": list(r.problems),
                 "started_utc": utc_iso(r.started) if r.started else None} for r in records]
    return Evaluation(predictions=verdicts, deviations=deviations, sessions=sessions, include_partial=include_partial,
                      excluded=excluded, sealed_utc=sealed_utc)


def evaluation_document(ev: Evaluation, sealed_path: Path, record) -> dict:
    """The JSON written by `softbench evaluate --json`: the seal it scored, when, and the verdicts."""
    return {"sealed": str(sealed_path), "sha256": record.sha256, "sealed_utc": record.meta.get("sealed_utc"),
            "git_commit": record.meta.get("git_commit"), "evaluated_utc": utc_iso(), **ev.to_dict()}
