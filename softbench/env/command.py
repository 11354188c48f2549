"""`softbench env`: print (or record) this machine's environment as softbench sees it."""

from __future__ import annotations

import json

import click


@click.command("env")
@click.option("--record", is_flag=True, help="also write it as a session under --out")
@click.option("--out", "out_dir", default="sessions", show_default=True, type=click.Path(file_okay=False))
def command(record: bool, out_dir: str):
    """Show the environment: GPU, driver, CUDA, versions, CPU, OS, power limit, NVML capabilities."""
    from softbench.core.checks import check_out_dir
    from softbench.core.envinfo import collect_env
    from softbench.core.session import Session

    if record:
        check_out_dir(out_dir)
    env = collect_env(gpu=True)
    click.echo(json.dumps(env, indent=2, default=str))
    if record:
        s = Session.create(out_dir, "env")
        s.write_json("env.json", env)
        s.set_status(complete=True, state="complete")
        click.echo(f"session: {s.path}", err=True)  # stdout stays the JSON alone, for jq and the like
