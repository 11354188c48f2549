"""`softbench seal`: validate a predictions file and seal it (canonical YAML plus its SHA-256) before any run."""

from __future__ import annotations

import click

from softbench.core.options import nonempty


@click.command("seal")
# an empty path first, or the seal's name, taken from its stem, would be what the refusal names
@click.argument("predictions", type=click.Path(dir_okay=False), callback=nonempty("predictions.yaml"))
@click.option("--name", default=None, help="sealed name [default: the file's stem]")
@click.option("--dir", "directory", default="sealed", show_default=True, type=click.Path(file_okay=False))
@click.option("--replace", is_flag=True,
              help="seal different content under an existing name: the old pair moves, unchanged, to "
                   "DIR/replaced/<its UTC stamp>-<its hash>/ and the new seal names the hash it replaces")
def command(predictions: str, name: str | None, directory: str, replace: bool):
    """Seal PREDICTIONS as DIR/NAME.yaml (canonical form) and DIR/NAME.sha256.

    Every scope key and evidence kind must be one that sessions record. Different content under an existing
    name is refused unless --replace; identical content is a no-op. A replacement is sealed at its own time, so
    only sessions started after it count as its evidence; a prediction's `until` (a UTC time) closes its window,
    and one already closed is refused. The .sha256 file is in `sha256sum -c` format; its '#'
    lines hold the UTC time, the git commit and one hash per prediction. Check it later with
    `softbench verify DIR/NAME.yaml`."""
    from softbench.core.console import out
    from softbench.predictions.seal import seal_file

    r = seal_file(predictions, name=name, directory=directory, replace=replace)
    n = r.record.meta.get("predictions", len(r.record.predictions))
    if r.created:
        out.print(f"sealed {n} predictions: {r.yaml_path}")
        out.print(f"sha256 {r.sha256}  (seal: {r.seal_path}, commit {r.record.meta.get('git_commit')}, "
                  f"{r.record.meta.get('sealed_utc')})")
        if r.archived:
            out.print(f"replaced {r.record.meta['replaces']}, archived in {r.archived}")
    else:
        out.print(f"already sealed with identical content, nothing written: {r.yaml_path}")
        out.print(f"sha256 {r.sha256}  (sealed {r.record.meta.get('sealed_utc', '?')})")
