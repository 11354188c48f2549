"""One kernel variant, compiled and run a fixed number of times, for the audit (softbench.audit.engine).

Usage: python -m softbench.audit.driver REQUEST.json RESULT.json

The request names the backend, variant, shape, seed and how many forwards to run after the compiling one
(`warmup`, then `calls`); the result says what ran and which cubins the compile left behind. The audit runs
this module on its own or under Nsight Compute; the first forward compiles, so the profiler skips
1 + warmup launches of the kernel before it measures one.

Cubins: the parent sets CuTe DSL's keep switches (CUTE_DSL_KEEP=cubin, CUTE_DSL_DUMP_DIR) so the compile
writes `<function>.<arch>.cubin` into the dump folder; this module also copies `__cubin__` from the compiled
functions in FA4's forward compile cache, when present, in case the file naming changes. Everything the
libraries print goes to stderr; the result is a JSON file."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import traceback
from pathlib import Path

from softbench.core.errors import SoftbenchError


def _harvest_compiled_cubins(dump_dir: Path) -> list[str]:
    """Copy `__cubin__` of every compiled FA4 forward in this process into dump_dir (deduplicated by hash)."""
    interface = sys.modules.get("flash_attn.cute.interface")
    fwd = getattr(interface, "_flash_attn_fwd", None) if interface else None
    cache = getattr(getattr(fwd, "compile_cache", None), "cache", None)
    if not isinstance(cache, dict):
        return []
    written = []
    for fn in cache.values():
        blob = getattr(fn, "__cubin__", None)
        if isinstance(blob, (bytes, bytearray)) and blob[:4] == b"\x7fELF":
            name = dump_dir / f"compiled-{hashlib.sha256(blob).hexdigest()[:16]}.cubin"
            name.write_bytes(bytes(blob))
            written.append(str(name))
    return written


def run(req: dict) -> dict:
    import torch

    from softbench.kernels.backends import make_backend
    from softbench.kernels.inputs import make_inputs
    from softbench.core.shapes import Shape

    t0 = time.monotonic()
    backend = make_backend(req["backend"], **req.get("options", {}))
    info = backend.load(req["variant"])
    load_s = time.monotonic() - t0
    shape = Shape(**req["shape"])
    cuda = backend.device.kind == "cuda"
    inputs = make_inputs(shape, int(req.get("seed", 0)), "cuda" if cuda else "cpu")
    forward = backend.build(shape, inputs)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    warmup, calls = int(req.get("warmup", 3)), int(req.get("calls", 2))
    with torch.inference_mode():
        t1 = time.monotonic()
        forward()  # compiles
        sync()
        compile_s = time.monotonic() - t1
        for _ in range(warmup + calls):
            forward()
        sync()
    dump_dir = Path(os.environ.get("CUTE_DSL_DUMP_DIR", "."))
    harvested = _harvest_compiled_cubins(dump_dir) if dump_dir.is_dir() else []
    return {"ok": True, "backend": req["backend"], "variant": req["variant"], "load": info,
            "load_s": round(load_s, 3), "compile_s": round(compile_s, 3), "forwards": 1 + warmup + calls,
            "warmup": warmup, "calls": calls, "device": {"kind": backend.device.kind, "name": backend.device.name,
                                                          "arch": backend.device.arch},
            "harvested_cubins": harvested, "pid": os.getpid()}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m softbench.audit.driver REQUEST.json RESULT.json", file=sys.stderr)
        return 2
    req_path, res_path = map(Path, argv)
    try:
        result = run(json.loads(req_path.read_text()))
        code = 0
    except SoftbenchError as e:
        result = {"ok": False, "error": str(e), "hint": e.hint, "type": type(e).__name__}
        code = e.exit_code
    except Exception as e:  # reported to the parent with the traceback on stderr
        traceback.print_exc()
        result = {"ok": False, "error": f"{type(e).__name__}: {e}", "type": "MeasurementError"}
        code = 1
    res_path.write_text(json.dumps(result, indent=2, default=str))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
