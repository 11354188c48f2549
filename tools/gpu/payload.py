#!/usr/bin/env python3
"""Carry files larger than one device call allows to the offline GPU host, in as few calls as the limit permits.

One call carries at most 64 MiB (the working tree included), so a model of 250 MB needs several calls, and the
machine is handed back 30 s after a call ends: every call should carry a full chunk. `pack` lays the files end to
end as one byte stream and cuts it into chunks of --chunk-mib (so a small file rides beside the tail of a large
one), each chunk in its own folder with the manifest and this script. On the host, `python3 DIR/cN/payload.py
unpack` (one chunk per call, in any order) copies its chunk to $SOFTBENCH_PAYLOAD_DIR (default
/tmp/softbench-payload), writes out every file whose bytes have all arrived, checks its sha256, pip-installs it
into DIR/site when it is a wheel, and rewrites env.sh: `export NAME=path` for each file written, PYTHONPATH for the
wheels. Safe to run again. Standard library only (the host's python3 and this machine's).

Here, from the project root:
    python3 tools/gpu/payload.py pack .gpu/pay --chunk-mib 57 FA3_WHEEL=fa3.whl SOFTBENCH_GEMMA3_FILE=gemma.gguf
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

MANIFEST = "manifest.json"


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def pack(dest: Path, chunk_mib: float, specs: list[str]) -> None:
    files, offset = [], 0
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name.isidentifier():
            sys.exit(f"payload: {spec!r} is not NAME=FILE (NAME an environment variable)")
        p = Path(path)
        if not p.is_file():
            sys.exit(f"payload: {path} is not a file")
        size = p.stat().st_size
        files.append({"var": name, "file": p.name, "source": str(p), "size": size, "offset": offset,
                      "sha256": sha256(p)})
        offset += size
    chunk = int(chunk_mib * (1 << 20))
    n = -(-offset // chunk)
    if dest.exists():
        shutil.rmtree(dest)
    manifest = {"chunk_bytes": chunk, "chunks": n, "total_bytes": offset,
                "files": [{k: v for k, v in f.items() if k != "source"} for f in files]}
    for i in range(n):
        d = dest / f"c{i + 1}"
        d.mkdir(parents=True)
        lo, hi = i * chunk, min(offset, (i + 1) * chunk)
        with (d / f"chunk{i + 1:02d}").open("wb") as out:
            for f in files:  # copy the part of each file that falls inside [lo, hi)
                a, b = max(lo, f["offset"]), min(hi, f["offset"] + f["size"])
                if a < b:
                    with open(f["source"], "rb") as src:
                        src.seek(a - f["offset"])
                        out.write(src.read(b - a))
        (d / MANIFEST).write_text(json.dumps(manifest, indent=1))
        shutil.copy(__file__, d / "payload.py")
        done = [f["var"] for f in files if f["offset"] + f["size"] <= hi and f["offset"] + f["size"] > lo]
        print(f"{d}: {(hi - lo) / 1e6:.1f} MB{'; completes ' + ', '.join(done) if done else ''}")


def unpack(here: Path) -> int:
    manifest = json.loads((here / MANIFEST).read_text())
    root = Path(os.environ.get("SOFTBENCH_PAYLOAD_DIR", "/tmp/softbench-payload"))
    (root / "chunks").mkdir(parents=True, exist_ok=True)
    for c in here.glob("chunk*"):
        if not (root / "chunks" / c.name).exists():
            shutil.copy(c, root / "chunks" / (c.name + ".tmp"))
            os.replace(root / "chunks" / (c.name + ".tmp"), root / "chunks" / c.name)
    chunk = manifest["chunk_bytes"]
    have = {int(p.name[5:]) - 1 for p in (root / "chunks").glob("chunk[0-9][0-9]")}
    env, site, status = [], root / "site", 0
    for f in manifest["files"]:
        out = root / f["file"]
        first, last = f["offset"] // chunk, (f["offset"] + f["size"] - 1) // chunk
        if not out.exists():
            if not all(i in have for i in range(first, last + 1)):
                print(f"payload: {f['var']} waits for chunks {first + 1}-{last + 1} (have {sorted(i + 1 for i in have)})")
                continue
            with (root / (f["file"] + ".tmp")).open("wb") as dst:
                for i in range(first, last + 1):
                    a, b = max(i * chunk, f["offset"]), min((i + 1) * chunk, f["offset"] + f["size"])
                    with (root / "chunks" / f"chunk{i + 1:02d}").open("rb") as src:
                        src.seek(a - i * chunk)
                        dst.write(src.read(b - a))
            if sha256(root / (f["file"] + ".tmp")) != f["sha256"]:
                print(f"payload: {f['file']} fails its sha256; the chunks are corrupt", file=sys.stderr)
                status = 4
                continue
            os.replace(root / (f["file"] + ".tmp"), out)
            print(f"payload: {f['var']} ready: {out}")
        if out.suffix == ".whl" and not (site / f".{out.name}.installed").exists():
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                            "--no-cache-dir", "--target", str(site), str(out)], check=True)
            (site / f".{out.name}.installed").touch()
        env.append(f'export {f["var"]}="{out}"')
    # chunks whose files are all written are no longer needed: free the host's /tmp
    written = {f["file"] for f in manifest["files"] if (root / f["file"]).exists()}
    for i in sorted(have):
        lo, hi = i * chunk, (i + 1) * chunk
        if all(f["file"] in written for f in manifest["files"] if f["offset"] < hi and f["offset"] + f["size"] > lo):
            (root / "chunks" / f"chunk{i + 1:02d}").unlink(missing_ok=True)
    if site.exists():
        env.append(f'export PYTHONPATH="{site}${{PYTHONPATH:+:$PYTHONPATH}}"')
    (root / "env.sh").write_text("\n".join(env) + "\n")
    print(f"payload: . {root}/env.sh")
    return status


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("dest", type=Path)
    p.add_argument("--chunk-mib", type=float, default=57.0)
    p.add_argument("files", nargs="+", metavar="NAME=FILE")
    sub.add_parser("unpack")
    a = ap.parse_args()
    if a.cmd == "pack":
        pack(a.dest, a.chunk_mib, a.files)
        return 0
    return unpack(Path(__file__).resolve().parent)


if __name__ == "__main__":
    sys.exit(main())
