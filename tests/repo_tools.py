"""The repository's scripts under tools/, loaded as modules by their path (they are not a package)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_tool(relative: str):
    """tools/<relative> as a module named after its file."""
    path = ROOT / "tools" / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
