import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def fa4_installed() -> bool:
    try:
        return importlib.metadata.version("flash-attn-4") == "4.0.0b36"
    except importlib.metadata.PackageNotFoundError:
        return False


def run_cli(*args, cwd=None, env=None, timeout=300) -> subprocess.CompletedProcess:
    """Run `python -m softbench ...` in a fresh process, as a user would."""
    return subprocess.run([sys.executable, "-m", "softbench", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, env={**os.environ, **(env or {})}, timeout=timeout)


@pytest.fixture
def cli():
    return run_cli
