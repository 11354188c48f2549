"""`softbench evaluate`: score sealed predictions against recorded sessions (met / failed / unverified)."""

from __future__ import annotations

import click


@click.command("evaluate")
@click.argument("sealed", type=click.Path(dir_okay=False))
@click.argument("more_sessions", nargs=-1, type=click.Path(exists=True), metavar="[DIR]...")
@click.option("--sessions", multiple=True, type=click.Path(exists=True),
              help="a session folder or a folder of sessions (repeatable; further paths may follow)")
@click.option("--include-partial", is_flag=True, help="also use partial sessions (labelled as such)")
@click.option("--json", "json_file", default=None, type=click.Path(dir_okay=False),
              help="write the evaluation as JSON to this file")
def command(sealed: str, more_sessions: tuple[str, ...], sessions: tuple[str, ...], include_partial: bool,
            json_file: str | None):
    """Verify SEALED, then score each prediction against the sessions in scope.

    Example: softbench evaluate sealed/paper.yaml --sessions sessions

    A prediction is met only when it holds in every session in scope that supplies its evidence and
    quantity; unverified when no such session exists. Sessions out of scope are ignored; partial ones
    are skipped unless --include-partial. Exit status is 0 whatever the verdicts (they are results)."""
    from softbench.core.console import out, table
    from softbench.core.errors import UsageError
    from softbench.predictions.evaluate import evaluate, evaluation_document, load_sessions
    from softbench.predictions.seal import verify
    from softbench.core.session import atomic_write_json

    paths = list(sessions) + list(more_sessions)
    if not paths:
        raise UsageError("no sessions given", hint="softbench evaluate SEALED --sessions sessions")
    v = verify(sealed)
    records = load_sessions(paths)
    ev = evaluate(v.content, records, include_partial=include_partial)
    out.print(f"seal OK: {v.yaml_path} sha256 {v.record.sha256[:16]}..., {len(records)} sessions read")
    rows, dev_rows = evaluation_rows(ev)
    out.print(table("predictions", ["id", "verdict", "condition", "evidence (session: value)", "reason"], rows))
    if dev_rows:
        out.print(table("deviations", ["prediction", "session", "kind", "detail"], dev_rows))
    c = ev.counts()
    out.print(f"met {c['met']}, failed {c['failed']}, unverified {c['unverified']}")
    if json_file:
        atomic_write_json(json_file, evaluation_document(ev, v.yaml_path, v.record))
        out.print(f"written: {json_file}")


_STYLE = {"met": "green", "failed": "red", "unverified": "yellow"}


def evaluation_rows(ev) -> tuple[list[list[str]], list[list[str]]]:
    """Table rows (rich markup) for the verdicts and for the deviations."""
    from rich.markup import escape

    rows = []
    for v in ev.predictions:
        evidence = "\n".join(f"{escape(e.session)}{' (partial)' if e.partial else ''}: {e.value:.4g} -> {e.outcome}"
                             for e in v.evidence) or "-"
        rows.append([escape(v.id), f"[{_STYLE[v.verdict]}]{v.verdict}[/]", escape(v.condition), evidence,
                     escape(v.reason)])
    devs = [[escape(d.prediction), escape(d.session), d.kind, escape(d.detail)] for d in ev.deviations]
    return rows, devs
