"""`softbench verify`: recompute a seal and refuse (non-zero exit) when the sealed file changed."""

from __future__ import annotations

import click


@click.command("verify")
@click.argument("sealed", type=click.Path(dir_okay=False))
def command(sealed: str):
    """Check that SEALED (sealed/NAME.yaml) still matches NAME.sha256 and is in canonical form.

    On a mismatch it says which predictions changed and shows a diff, and exits with status 6; a seal that is
    missing or damaged (no seal softbench seal would write) is bad input, status 2."""
    from softbench.core.console import out
    from softbench.predictions.seal import verify

    v = verify(sealed)
    meta = v.record.meta
    out.print(f"OK {v.yaml_path}: sha256 {v.record.sha256}")
    out.print(f"   {len(v.content['predictions'])} predictions, sealed {meta['sealed_utc']} "
              f"at commit {meta['git_commit']}")
