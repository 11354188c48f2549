"""One kernel variant, compiled and run a fixed number of times, for the audit (softbench.audit.engine).

Usage: python -m softbench.audit.driver REQUEST.json RESULT.json

The request names the backend, variant, shape, seed and how many forwards to run after the compiling one
(`warmup`, then `calls`); the result says what ran and which cubins the compile left behind. The audit runs
this module on its own or under Nsight Compute; the first forward compiles, so the profiler skips
1 + warmup launches of the kernel before it measures one.

Cubins: the parent sets CuTe DSL's keep switches (CUTE_DSL_KEEP=cubin, CUTE_DSL_DUMP_DIR) so the compile
writes `<function>.<arch>.cubin` into the dump folder; this module also copies `__cubin__` from the compiled
functions in FA4's forward compile cache, when present, in case the file naming changes (softbench.audit.child,
which also holds the request/result protocol this module shares with the nsight-python driver).

A request with a `target` (--arch sm_100a) compiles for that GPU on fake tensors and runs nothing
(softbench.audit.cross). With --backend triton the compiled kernels' cubins come from Triton's own kernel cache
(softbench.audit.child.harvest_triton_cubins)."""

from __future__ import annotations

import sys

from softbench.audit.child import (compiled_forward, harvest_compiled_cubins, harvest_triton_cubins, serve_request,
                                   triton_loop_record)


def run(req: dict, _result_path=None) -> dict:
    import torch

    if req.get("target"):  # --arch sm_100a: compiled for a GPU that is not here, nothing run
        from softbench.audit.cross import compile_only

        return {**compile_only(req), "harvested_cubins": harvest_compiled_cubins()}
    compiled = compiled_forward(req)
    warmup, calls = int(req.get("warmup", 3)), int(req.get("calls", 2))
    with torch.inference_mode():
        for _ in range(warmup + calls):
            compiled.forward()
        compiled.sync()
    result = {**compiled.record, "forwards": 1 + warmup + calls, "warmup": warmup, "calls": calls}
    if req["backend"] == "triton":  # softbench's own kernels: their cubin and key loop, as the cross-compile's
        cubins = harvest_triton_cubins()
        return {**result, "harvested_cubins": cubins,
                "triton": triton_loop_record(compiled.record.get("build"), cubins)}
    return {**result, "harvested_cubins": harvest_compiled_cubins()}


def main(argv: list[str]) -> int:
    return serve_request(argv, "softbench.audit.driver", run)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
