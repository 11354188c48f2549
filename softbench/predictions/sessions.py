"""Recorded sessions as the evaluator and the report read them: each session folder's status, summary, protocol
and environment, the facts a prediction's scope is matched against, and the earliest time the session records."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from softbench.core.datafile import DamagedFile, load_mapping
from softbench.core.errors import UsageError
from softbench.core.session import STATUS_FILE
from softbench.core.shapes import SHAPE_KEYS
from softbench.core.utc import folder_time, parse_utc
from softbench.predictions.vocabulary import CODE_KEYS


@dataclass(frozen=True)
class SessionRecord:
    """One recorded session as evaluation sees it."""

    name: str
    path: str
    command: str
    complete: bool
    summary: dict
    protocol: dict
    facts: dict
    problems: tuple[str, ...] = ()
    started: _dt.datetime | None = None  # the earliest time the session records (see session_start)
    env: dict = field(default_factory=dict)  # env.json as recorded ({} when absent), for what facts leave out

    @property
    def board(self) -> str:
        """The GPU the session ran on, by the name env.json records ('NVIDIA H200'); '' where it records none."""
        return str(self.facts.get("gpu_name") or "")

    def supplies(self, kind: str) -> bool:
        if kind == self.command:
            return True
        listed = self.summary.get("evidence")
        if isinstance(listed, (list, tuple)) and kind in listed:
            return True
        v = self.summary.get(kind)
        return v is not None and v != {} and v != [] and not isinstance(v, bool)


def _read_mapping(path: Path, problems: list[str]) -> dict:
    """The mapping in a JSON or YAML file; {} when absent. A damaged file is noted in `problems`, not fatal:
    one broken session must not stop the scoring or the report of the others."""
    if not path.exists():
        return {}
    try:
        return load_mapping(path)
    except DamagedFile as e:
        problems.append(f"{path.name} unreadable ({e.cause})" if e.cause else f"{path.name} holds no mapping")
        return {}


def _fact(v: Any) -> bool:
    """A value a scope can match. A recorded null is no fact: it must not hide what another file records (the
    summary's variant under a protocol's null, status.json's command under a summary's null)."""
    return isinstance(v, (str, int, float, bool))


def session_facts(status: dict, summary: dict, protocol: dict, env: dict | None = None) -> dict:
    facts: dict = {}
    for source in (summary, protocol):  # protocol.yaml names variants; summary.json may hold labels (A0')
        facts.update({k: v for k, v in source.items() if _fact(v)})
        shape = source.get("shape")
        if isinstance(shape, dict):
            facts.update({k: shape[k] for k in SHAPE_KEYS if _fact(shape.get(k))})
    facts.setdefault("command", status.get("command"))
    own = (env or {}).get("softbench")
    if isinstance(own, dict):
        facts.update({k: own[k] for k in CODE_KEYS if k in own})
        if "commit" in own:
            facts["git_commit"] = own["commit"]
    gpu = (env or {}).get("gpu")
    if isinstance(gpu, dict):  # a session without a GPU records none: a scope naming one excludes it
        facts.update({f"gpu_{k}": gpu[k] for k in ("name", "capability") if _fact(gpu.get(k)) and gpu.get(k)})
    return facts


def session_start(name: str, summary: dict, protocol: dict, env: dict) -> _dt.datetime | None:
    """The earliest time a session records about its own start. The earliest, because a session that could have
    begun before a seal must not count as evidence after it; the folder's stamp (Session.create, to the second,
    rounded down) is one of them, so a session started within the seal's second is counted as before it."""
    times = [parse_utc(protocol.get("started_utc")), parse_utc(summary.get("started_utc")),
             parse_utc(env.get("recorded_utc"))]
    times.append(folder_time(name))
    known = [t for t in times if t is not None]
    return min(known) if known else None


def load_session(path: Path | str) -> SessionRecord:
    path = Path(path)
    problems: list[str] = []
    status = _read_mapping(path / STATUS_FILE, problems)
    summary = _read_mapping(path / "summary.json", problems)
    protocol = _read_mapping(path / "protocol.yaml", problems)
    env = _read_mapping(path / "env.json", problems)
    # only JSON true is complete: "no", "false" or 0, written by hand, read as truthy would pass a partial session
    # off as complete evidence
    complete = status.get("complete") is True and summary.get("complete", True) is True
    facts = session_facts(status, summary, protocol, env)
    return SessionRecord(name=path.name, path=str(path), command=str(facts.get("command")),
                         complete=complete, summary=summary, protocol=protocol, facts=facts,
                         problems=tuple(problems), started=session_start(path.name, summary, protocol, env),
                         env=env)


def session_dirs(paths) -> list[Path]:
    """Session folders at the given paths: a session itself, or the sessions directly inside a folder of them (one
    level). status.json is not parsed here, so that a damaged one is reported later. A session reached twice (named
    beside its folder, with a trailing slash, through a link) is listed once: it is one piece of evidence."""
    found: dict[Path, Path] = {}
    for p in map(Path, paths):
        if (p / STATUS_FILE).exists():
            hits = [p]
        elif p.is_dir():
            hits = [s.parent for s in sorted(p.glob(f"*/{STATUS_FILE}"))]
        else:
            raise UsageError(f"{p} is neither a session nor a folder of sessions")
        for s in hits:
            found.setdefault(s.resolve(), s)
    return list(found.values())


def load_sessions(paths) -> list[SessionRecord]:
    return [load_session(p) for p in session_dirs(paths)]
