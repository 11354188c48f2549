"""The package as a wheel, not as this checkout: build it, install it into a fresh virtual environment and run
commands that read the protocols shipped inside it (importlib.resources), from a folder outside the checkout.

Offline and without a second copy of torch: the new environment gets only the wheel (--no-deps); the
dependencies come from the environment running this test, whose site-packages is added as a plain path (a .pth
line), so that its own .pth files, among them an editable install of softbench, are not processed."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def sh(*cmd, cwd=None, env=None, timeout=600) -> subprocess.CompletedProcess:
    done = subprocess.run(list(map(str, cmd)), cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{cmd}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.mark.slow
def test_the_installed_wheel_runs_from_anywhere(tmp_path):
    # built from a copy: setuptools writes its egg-info and build folders beside the sources
    src = tmp_path / "src"
    shutil.copytree(ROOT / "softbench", src / "softbench", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    wheels = tmp_path / "wheels"
    # --no-build-isolation: use this environment's setuptools instead of fetching one
    sh(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", wheels, src, env=clean)
    (wheel,) = wheels.glob("softbench-*.whl")
    venv = tmp_path / "venv"
    sh(sys.executable, "-m", "venv", "--without-pip", venv)
    py = venv / "bin" / "python"
    target = Path(sh(py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    sh(sys.executable, "-m", "pip", "--python", py, "install", "--no-deps", "--no-index", wheel, env=clean)
    # after the install: pip would take the editable softbench seen through this path for the wheel itself
    deps = [p for p in {sysconfig.get_paths()["purelib"], *site.getsitepackages()} if Path(p).is_dir()]
    (target / "softbench-test-deps.pth").write_text("".join(f"{p}\n" for p in deps))

    work = tmp_path / "elsewhere"
    work.mkdir()
    env = clean
    where = sh(py, "-c", "import softbench; print(softbench.__file__)", cwd=work, env=env).stdout.strip()
    assert Path(where).is_relative_to(target), f"softbench came from {where}, not from the wheel"
    exe = venv / "bin" / "softbench"
    dry = sh(exe, "sweep", "emulation", "--dry-run", cwd=work, env=env)
    assert dry.stdout.startswith("emulation-sweep-paper: fp8-8K-causal-b1h16d128 against A0")
    sh(exe, "latency", "--backend", "sim", "--seq", "256", "--heads", "2", "--protocol", "paper", "--rounds", "1", "--windows", "1",
       "--calls", "2", "--warmup", "1", "--out", "sessions", cwd=work, env=env)
    (session,) = (work / "sessions").iterdir()
    assert (session / "summary.json").exists() and '"complete": true' in (session / "status.json").read_text()
