"""The softbench command line: a thin click group. Each command lives in its own package
(softbench/<command>/command.py) and is imported only when used, so `softbench --help` stays fast and nothing touches the GPU at import time.
Errors become exit codes here, in one place."""

from __future__ import annotations

import importlib
import sys

import click

from softbench import __version__
from softbench.core.errors import SoftbenchError

# command name -> module defining `command` (a click.Command); each command lives in its own package
COMMANDS = {
    "latency": "softbench.latency.command",
    "sweep": "softbench.sweep.command",
    "energy": "softbench.energy.command",
    "trace": "softbench.trace.command",
    "audit": "softbench.audit.command",
    "gates": "softbench.gates.command",
    "fidelity": "softbench.fidelity.command",
    "seal": "softbench.predictions.seal_command",
    "verify": "softbench.predictions.verify_command",
    "evaluate": "softbench.predictions.evaluate_command",
    "report": "softbench.report.command",
    "env": "softbench.env.command",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        mod = COMMANDS.get(name)
        if mod is None:
            return None
        return importlib.import_module(mod).command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="softbench")
def group():
    """Measure what a softmax approximation inside a fused attention kernel costs and buys."""


def main(argv=None) -> int:
    try:
        group.main(args=argv, prog_name="softbench", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 130
    except KeyboardInterrupt as e:
        where = getattr(e, "partial_session", None)
        click.echo(f"interrupted: the session is kept and marked partial: {where}" if where else
                   "interrupted: the session is kept and marked partial", err=True)
        return 130
    except click.ClickException as e:
        e.show()
        return e.exit_code
    except SoftbenchError as e:
        click.secho(f"error: {e}", fg="red", err=True)
        if e.hint:
            click.echo(f"hint: {e.hint}", err=True)
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
