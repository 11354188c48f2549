"""tools/gpu/payload.py: files cut into chunks for the device's per-call limit come back whole, in any order of
arrival, and a damaged chunk is caught by the sha256 instead of being handed to a run."""
from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[1] / "tools" / "gpu" / "payload.py"


def run(*args, env=None):
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


def files(tmp_path):
    rng = random.Random(0)
    out = {}
    for name, size in (("SMALL_TEXT", 700), ("BIG_MODEL", 5000), ("TINY", 3)):
        p = tmp_path / "src" / f"{name.lower()}.bin"
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(bytes(rng.randrange(256) for _ in range(size)))
        out[name] = p
    return out


def test_chunks_arriving_in_any_order_give_the_files_back(tmp_path):
    src = files(tmp_path)
    dest = tmp_path / "pay"
    r = run(TOOL, "pack", dest, "--chunk-mib", 1024 / 2**20, *(f"{k}={v}" for k, v in src.items()))
    assert r.returncode == 0, r.stderr
    chunks = sorted(dest.iterdir())
    assert len(chunks) == 6  # 5703 bytes in chunks of 1024
    assert "completes BIG_MODEL" in r.stdout
    host = {"SOFTBENCH_PAYLOAD_DIR": str(tmp_path / "host")}
    order = [chunks[i] for i in (3, 0, 5, 1, 4, 2)]
    for i, c in enumerate(order):
        r = run(c / "payload.py", "unpack", env=host)
        assert r.returncode == 0, r.stderr
        if i == 0:
            assert "BIG_MODEL waits for chunks" in r.stdout
    for name, p in src.items():
        assert (tmp_path / "host" / p.name).read_bytes() == p.read_bytes()
    env = (tmp_path / "host" / "env.sh").read_text()
    assert all(f'export {name}="{tmp_path / "host" / p.name}"' in env for name, p in src.items())
    # every file written: the chunks are freed
    assert not list((tmp_path / "host" / "chunks").iterdir())


def test_a_damaged_chunk_is_refused(tmp_path):
    src = files(tmp_path)
    dest = tmp_path / "pay"
    assert run(TOOL, "pack", dest, "--chunk-mib", 4096 / 2**20, f"BIG_MODEL={src['BIG_MODEL']}").returncode == 0
    c1 = dest / "c1" / "chunk01"
    data = bytearray(c1.read_bytes())
    data[100] ^= 0xFF
    c1.write_bytes(bytes(data))
    host = {"SOFTBENCH_PAYLOAD_DIR": str(tmp_path / "host")}
    run(dest / "c1" / "payload.py", "unpack", env=host)
    r = run(dest / "c2" / "payload.py", "unpack", env=host)
    assert r.returncode == 4 and "fails its sha256" in r.stderr
    assert not (tmp_path / "host" / src["BIG_MODEL"].name).exists()


def test_a_spec_without_a_name_is_refused(tmp_path):
    src = files(tmp_path)
    r = run(TOOL, "pack", tmp_path / "pay", str(src["TINY"]))
    assert r.returncode != 0 and "is not NAME=FILE" in r.stderr
