"""The repository's scripts under tools/, loaded as modules by their path (they are not a package), copies of its
committed sessions for tests that change or group them, and session folders written by hand."""

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SESSIONS = ROOT / "sessions"


def load_tool(relative: str):
    """tools/<relative> as a module named after its file (tools_<stem>, registered in sys.modules as
    an import would, so that its dataclasses can resolve their own module)."""
    path = ROOT / "tools" / relative
    spec = importlib.util.spec_from_file_location(f"tools_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def relabel_board(session: Path, board: str) -> None:
    """Record a copied session as run on `board` (env.json's gpu name), as an H100's session records it."""
    env_path = session / "env.json"
    env = json.loads(env_path.read_text())
    env["gpu"]["name"] = board
    env_path.write_text(json.dumps(env))


def copy_sessions(names, into: Path) -> Path:
    """Copy the committed sessions `names` into the folder `into` (made if absent) and return it."""
    into.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copytree(SESSIONS / name, into / name)
    return into


def write_session(root: Path, name: str, status: dict, summary: dict | None = None, protocol: dict | None = None,
                  env: dict | None = None, records: dict[str, list[dict]] | None = None) -> Path:
    """A session folder root/name holding exactly the files given: status.json, and summary.json, protocol.yaml,
    env.json and JSON-lines records where given (each as written, nothing filled in)."""
    d = root / name
    d.mkdir(parents=True)
    (d / "status.json").write_text(json.dumps(status))
    if summary is not None:
        (d / "summary.json").write_text(json.dumps(summary))
    if protocol is not None:
        (d / "protocol.yaml").write_text(yaml.safe_dump(protocol))
    if env is not None:
        (d / "env.json").write_text(json.dumps(env))
    for fname, rows in (records or {}).items():
        (d / fname).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d
