"""What the audit's two child processes share (softbench.audit.driver, and softbench.audit.nsight_driver under
nsight-python): the REQUEST.json -> RESULT.json protocol with its exit codes, and the compiled forward with the
record of what ran.

The parent reads the result file, not stdout: everything the libraries print goes to stderr (the driver's log).
A SoftbenchError keeps its exit code and hint; any other exception is a MeasurementError with the traceback on
stderr, so that a crash in CuTe DSL or under ncu is diagnosable from the session."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from softbench.core.errors import SoftbenchError


def serve_request(argv: list[str], module: str, run: Callable[[dict, Path], dict]) -> int:
    """`python -m <module> REQUEST.json RESULT.json`: run(request, result_path) -> the result, written to RESULT
    whatever happens; 0 when the result says ok."""
    if len(argv) != 2:
        print(f"usage: python -m {module} REQUEST.json RESULT.json", file=sys.stderr)
        return 2
    req_path, res_path = map(Path, argv)
    try:
        result = run(json.loads(req_path.read_text()), res_path)
        code = 0 if result.get("ok") else 1
    except SoftbenchError as e:
        result = {"ok": False, "error": str(e), "hint": e.hint, "type": type(e).__name__}
        code = e.exit_code
    except Exception as e:  # reported to the parent with the traceback on stderr
        traceback.print_exc()
        result = {"ok": False, "error": f"{type(e).__name__}: {e}", "type": "MeasurementError"}
        code = 1
    res_path.write_text(json.dumps(result, indent=2, default=str))
    return code


@dataclass
class CompiledForward:
    forward: Callable[[], object]
    sync: Callable[[], None]
    record: dict  # what ran: backend, variant, what loading said, load and compile times, device, pid


def compiled_forward(req: dict) -> CompiledForward:
    """The request's backend and variant loaded, its forward built on fixed-seed inputs of the request's shape
    and called once: the call that compiles, so that what the profiler measures later is a compiled launch."""
    import torch

    from softbench.core.shapes import Shape
    from softbench.kernels.backends import make_backend
    from softbench.kernels.inputs import make_inputs

    t0 = time.monotonic()
    backend = make_backend(req["backend"], **req.get("options", {}))
    info = backend.load(req["variant"])
    load_s = time.monotonic() - t0
    shape = Shape(**req["shape"])
    cuda = backend.device.kind == "cuda"
    inputs = make_inputs(shape, int(req.get("seed", 0)), "cuda" if cuda else "cpu")
    forward = backend.build(shape, inputs)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    with torch.inference_mode():
        t1 = time.monotonic()
        forward()
        sync()
        compile_s = time.monotonic() - t1
    record = {"ok": True, "backend": req["backend"], "variant": req["variant"], "load": info,
              "build": getattr(forward, "info", None),  # what the backend chose to run, where it says
              "load_s": round(load_s, 3), "compile_s": round(compile_s, 3),
              "device": {"kind": backend.device.kind, "name": backend.device.name, "arch": backend.device.arch},
              "pid": os.getpid()}
    return CompiledForward(forward, sync, record)


def harvest_compiled_cubins() -> list[str]:
    """Copy `__cubin__` of every compiled FA4 forward in this process into CuTe DSL's dump folder
    (CUTE_DSL_DUMP_DIR, deduplicated by hash): the cubins the audit disassembles, in case CuTe DSL's own file
    naming changes."""
    dump_dir = Path(os.environ.get("CUTE_DSL_DUMP_DIR", "."))
    interface = sys.modules.get("flash_attn.cute.interface")
    fwd = getattr(interface, "_flash_attn_fwd", None) if interface else None
    cache = getattr(getattr(fwd, "compile_cache", None), "cache", None)
    if not dump_dir.is_dir() or not isinstance(cache, dict):
        return []
    blobs = (getattr(fn, "__cubin__", None) for fn in cache.values())
    return [_keep_cubin(dump_dir, "compiled", blob) for blob in blobs
            if isinstance(blob, (bytes, bytearray)) and blob[:4] == b"\x7fELF"]


def _keep_cubin(dump_dir: Path, stem: str, blob: bytes) -> str:
    """A harvested cubin written into the dump folder as <stem>-<sha256 prefix>.cubin (the same cubin twice is
    one file); its path."""
    name = dump_dir / f"{stem}-{hashlib.sha256(blob).hexdigest()[:16]}.cubin"
    name.write_bytes(bytes(blob))
    return str(name)


# softbench's Triton forwards (module, JIT function): the kernels --backend triton runs
TRITON_KERNELS = (("softbench.kernels.gluon_attn", "_attn_fwd_ws"), ("softbench.kernels.triton_attn", "_attn_fwd"))


def harvest_triton_cubins() -> list[str]:
    """Write the cubin of every attention forward softbench's Triton backend compiled in this process (Triton's
    in-memory kernel cache of each JIT function) into the dump folder, as the cross-compile writes its one: the
    SASS the audit reads is the launch's own."""
    dump_dir = Path(os.environ.get("CUTE_DSL_DUMP_DIR", "."))
    if not dump_dir.is_dir():
        return []
    written = []
    for module_name, fn_name in TRITON_KERNELS:
        fn = getattr(sys.modules.get(module_name), fn_name, None)
        for cache in (getattr(fn, "device_caches", None) or {}).values():
            for kernel in cache[0].values():
                blob = kernel.asm.get("cubin")
                if isinstance(blob, (bytes, bytearray)):
                    written.append(_keep_cubin(dump_dir, kernel.name, blob))
    return written


def triton_loop_record(build: dict | None, cubins: list[str]) -> dict | None:
    """What --backend triton ran, as the sm_90a cross-compile records it (triton_compile.audit_compile): the
    kernel, its configuration's label and one iteration of its key loop, from the one attention cubin this
    process compiled. None where there is no single such cubin."""
    if not build or len(cubins) != 1:
        return None
    from softbench.kernels.triton_compile import _sass_summary

    return {"kernel": build.get("kernel"), "config": (build.get("config") or {}).get("label"),
            "loop": _sass_summary(Path(cubins[0]).read_bytes())}
