"""`softbench evaluate`: score sealed predictions against recorded sessions (met / failed / unverified)."""

from __future__ import annotations

from pathlib import Path

import click

from softbench.core.options import ExistingPath


@click.command("evaluate")
@click.argument("sealed", type=click.Path(dir_okay=False))
@click.argument("more_sessions", nargs=-1, type=ExistingPath("sealed/NAME.yaml sessions"), metavar="[DIR]...")
@click.option("--sessions", multiple=True, type=ExistingPath("sessions"),
              help="a session folder or a folder of sessions (repeatable; further paths may follow)")
@click.option("--include-partial", is_flag=True, help="also use partial sessions (labelled as such)")
@click.option("--json", "json_file", default=None, type=click.Path(dir_okay=False),
              help="write the evaluation as JSON to this file")
def command(sealed: str, more_sessions: tuple[str, ...], sessions: tuple[str, ...], include_partial: bool,
            json_file: str | None):
    """Verify SEALED, then score each prediction against the sessions in scope.

    Example: softbench evaluate sealed/paper.yaml --sessions sessions

    Only sessions started after the seal's time count (and, for a prediction with `until`, before that): others in
    scope are listed as excluded, with the reason, as are sessions whose source hash (source_sha256, git_commit) or
    protocol (protocol.rounds, ...) differs from what the scope names. A prediction is met only when it holds in
    every session in scope that supplies its evidence and quantity; unverified when no such session exists. Sessions
    out of scope are ignored; partial ones are skipped unless --include-partial. Exit status is 0 whatever the
    verdicts (they are results)."""
    from softbench.core.checks import check_out_file
    from softbench.core.console import out, table
    from softbench.core.errors import UsageError
    from softbench.predictions.evaluate import evaluate, evaluation_document
    from softbench.predictions.sessions import load_sessions
    from softbench.predictions.seal import verify
    from softbench.core.session import atomic_write_json

    paths = list(sessions) + list(more_sessions)
    if not paths:
        raise UsageError("no sessions given", hint="softbench evaluate SEALED --sessions sessions")
    if json_file is not None:  # not `if json_file`: check_out_file refuses an empty value, not taken as no --json
        check_out_file(json_file, "--json")
    v = verify(sealed)
    sealed_utc = v.record.meta["sealed_utc"]  # verify refuses a seal without one
    records = load_sessions(paths)
    if json_file:
        _refuse_overwriting_evidence(Path(json_file), v, records)
    ev = evaluate(v.content, records, include_partial=include_partial, sealed_utc=sealed_utc)
    out.print(f"seal OK: {v.yaml_path} sha256 {v.record.sha256[:16]}..., sealed {sealed_utc}, "
              f"{len(records)} sessions read")
    rows, dev_rows, excl_rows = evaluation_rows(ev)
    out.print(table("predictions", ["id", "verdict", "condition", "evidence (session: value)", "reason"], rows))
    if excl_rows:
        out.print(table("excluded (in scope, but not evidence for this seal)", ["prediction", "session", "reason"],
                        excl_rows))
    if dev_rows:
        out.print(table("deviations", ["prediction", "session", "kind", "detail"], dev_rows))
    c = ev.counts()
    out.print(f"met {c['met']}, failed {c['failed']}, unverified {c['unverified']}")
    if json_file:
        atomic_write_json(json_file, evaluation_document(ev, v.yaml_path, v.record))
        out.print(f"written: {json_file}")


def _refuse_overwriting_evidence(json_file: Path, verified, records) -> None:
    """--json must not land on the seal's own pair or inside a session it reads: either would replace the
    evidence the verdicts rest on."""
    from softbench.core.errors import UsageError

    target = json_file.resolve()
    if target in (verified.yaml_path.resolve(), verified.seal_path.resolve()):
        raise UsageError(f"--json {json_file} is one of the sealed pair's own files; write the verdicts elsewhere")
    for rec in records:
        if Path(rec.path).resolve() in target.parents:
            raise UsageError(f"--json {json_file} lies inside the session {rec.name}, which this evaluation reads; "
                             "write the verdicts elsewhere")


_STYLE = {"met": "green", "failed": "red", "unverified": "yellow"}


def evaluation_rows(ev) -> tuple[list[list[str]], list[list[str]], list[list[str]]]:
    """Table rows (rich markup) for the verdicts, the deviations and the excluded sessions."""
    from rich.markup import escape

    rows = []
    for v in ev.predictions:
        evidence = "\n".join(f"{escape(e.session)}{' (partial)' if e.partial else ''}"
                             f"{' [' + escape(e.gpu) + ']' if e.gpu else ''}: {e.value:.4g} -> {e.outcome}"
                             for e in v.evidence) or "-"
        rows.append([escape(v.id), f"[{_STYLE[v.verdict]}]{v.verdict}[/]", escape(v.condition), evidence,
                     escape(v.reason)])
    devs = [[escape(d.prediction), escape(d.session), d.kind, escape(d.detail)] for d in ev.deviations]
    excl = [[escape(x.prediction), escape(x.session), escape(x.reason)] for x in ev.excluded]
    return rows, devs, excl
