"""The softbench command line: a thin click group. Each command lives in its own package
(softbench/<command>/command.py) and is imported only when used, so `softbench --help` stays fast and nothing touches the GPU at import time.
Errors become exit codes here, in one place."""

from __future__ import annotations

import importlib
import os
import sys

import click

from softbench import __version__
from softbench.core.errors import SoftbenchError
from softbench.core.options import CommandGroup

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


class LazyGroup(CommandGroup):
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


def print_error(message: str, hint: str | None, code: int) -> int:
    """The one shape every failure takes: `error: ...` on one line, an optional `hint: ...`, an exit code (also
    for softbench's own module entry points, e.g. softbench.kernels.triton_compile)."""
    first, _, rest = str(message).partition("\n")
    click.secho(f"error: {first}", fg="red", err=True)
    if rest:  # detail that belongs to the error (a seal's diff) follows, never as a second `error:` line
        click.echo(rest, err=True)
    if hint:
        click.echo(f"hint: {hint}", err=True)
    return code


def _interrupted() -> int:
    """Ctrl-C: name the sessions this run left partial, so that the user knows what was kept and where."""
    from softbench.core.session import CREATED

    unfinished = []
    for s in CREATED:
        try:
            if not s.status().get("complete"):
                unfinished.append(s.path)
        except (OSError, ValueError):
            unfinished.append(s.path)
    if unfinished:
        for path in unfinished:
            click.echo(f"interrupted: the partial session is kept: {path}", err=True)
    elif CREATED:  # stopped after its sessions were complete (while printing, or cleaning up)
        for s in CREATED:
            click.echo(f"interrupted after the session was complete: {s.path}", err=True)
    else:
        click.echo("interrupted: no session had been started, nothing was written", err=True)
    return 130


def _raised_by_an_interrupt(exc: BaseException) -> bool:
    """Whether a Ctrl-C stands behind `exc`: a library caught the KeyboardInterrupt and raised its own error while
    handling it (transformers' lazy imports answer one that lands mid-import with an ImportError). That is the
    user's interrupt, not a bug in softbench."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def main(argv=None) -> int:
    from softbench.runtime.session_runner import sigterm_as_interrupt

    try:
        # SIGTERM (a job limit, `kill`) takes Ctrl-C's path in every command, and the previous handler is restored
        with sigterm_as_interrupt():
            group.main(args=argv, prog_name="softbench", standalone_mode=False)
    except click.exceptions.Abort as e:
        if isinstance(e.__context__, KeyboardInterrupt):  # click turns Ctrl-C into Abort
            return _interrupted()
        click.echo("aborted", err=True)
        return 130
    except KeyboardInterrupt:
        return _interrupted()
    except click.ClickException as e:
        ctx = getattr(e, "ctx", None)
        hint = f"{ctx.command_path} --help lists the options" if ctx is not None else None
        return print_error(e.format_message(), hint, e.exit_code)
    except SoftbenchError as e:
        return print_error(str(e), e.hint, e.exit_code)
    except OSError as e:
        # the machine refused (disk full, permissions changed mid-run): its words, not a traceback
        where = f" ({e.filename})" if e.filename else ""
        return print_error(f"{e.strerror or e}{where}", None, 74)
    except Exception as e:
        if _raised_by_an_interrupt(e):
            return _interrupted()
        if os.environ.get("SOFTBENCH_TRACEBACK"):
            raise
        return print_error(f"internal error: {type(e).__name__}: {e}",
                      "this is a bug in softbench; SOFTBENCH_TRACEBACK=1 shows the traceback", 70)
    return 0


if __name__ == "__main__":
    sys.exit(main())
