"""RunOptions: the fields that the options of every command running a backend's kernels in worker processes hold
alike (latency, sweep, energy, trace, audit, gates), and what they mean, in one place."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """The base of those commands' options dataclasses; each adds its own fields, its backend among them (the
    default differs: sim or fa4). Keyword-only, so that a command's own fields keep their order and its required
    ones (the shapes) need no default. The sessions record these fields under these names."""

    # the keyword options of the command's backend, given to it in every worker process
    # (softbench.kernels.backends.make_backend): --triton-config's kernel configuration, the simulation's rescale
    # threshold or tile
    backend_options: dict = field(default_factory=dict)
    # the folder in which the session's folder is made (softbench.core.session.Session.create)
    out_dir: Path = Path("sessions")
    # the command as it was given ("softbench latency ..."), recorded in protocol.yaml; "" where no command line
    # made the run
    command_line: str = ""
