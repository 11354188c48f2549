"""The audit's process for `--collector nsight-python`: one variant's forward profiled through NVIDIA's
nsight-python (`nsight.analyze.kernel` around an `nsight.annotate` range).

Usage: python -m softbench.audit.nsight_driver REQUEST.json RESULT.json

nsight-python 0.9.x runs this file a second time under ncu (`ncu ... --nvtx --nvtx-include ... python <this
file> REQUEST RESULT`, NSPY_NCU_PROFILE set). In the first process the decorated function never runs:
nsight-python starts ncu and then reads the report into its DataFrame. In the second, under ncu, the function
builds the kernel, compiles it and runs the warm-up forwards outside the range, runs one forward inside it
(the launch ncu profiles: the same 1 + warmup forwards before it as `--collector ncu`), writes what ran to
RESULT's `.child.json` sibling, and nsight-python ends that process itself.

The request is softbench.audit.driver's, plus `metrics` and `output_prefix` (where nsight-python writes its
report and log). The result names the report, nsight-python's DataFrame (CSV) and any error nsight-python
raised after the report was written (more than one kernel in the range, say): the audit reads the report with
its own readers either way."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

if __name__ == "__main__":
    # Run as a file (nsight-python's command line), this folder is sys.path[0], and the audit's module names
    # (ncu, sass, engine, ...) would shadow any top-level module of those names that a library imports.
    _here = os.path.dirname(os.path.realpath(__file__))
    sys.path[:] = [p for p in sys.path if not p or os.path.realpath(p) != _here]

# after the path is fixed, so that nothing below can pick up a shadowing module
from softbench.audit.child import compiled_forward, harvest_compiled_cubins, serve_request  # noqa: E402
from softbench.audit.tools import read_result  # noqa: E402

ANNOTATION = "attention"
FUNCTION = "attention_forward"


def nsight_settings(req: dict) -> dict:
    """Arguments of nsight.analyze.kernel, chosen to profile as `--collector ncu` does: the clocks left to
    the GPU, caches flushed between replay passes (ncu's default), kernel replay, one run; nsight-python's
    thermal pauses off, as the ncu collector has none (settling belongs to softbench's protocol)."""
    return {"configs": [(0,)], "runs": 1, "metrics": list(req["metrics"]), "clock_control": "none",
            "cache_control": "all", "replay_mode": "kernel", "thermal_mode": "off", "output": "progress",
            "output_prefix": req["output_prefix"]}


def report_path(req: dict) -> Path:
    """Where nsight-python 0.9.x writes the report of the first call of FUNCTION (run id 0)."""
    return Path(f"{req['output_prefix']}ncu-output-{FUNCTION}-0.ncu-rep")


def _profiled_forward(req: dict, child_result: Path) -> None:
    import nsight
    import torch

    compiled = compiled_forward(req)
    warmup = int(req.get("warmup", 3))
    with torch.inference_mode():
        for _ in range(warmup):
            compiled.forward()
        compiled.sync()
        with nsight.annotate(ANNOTATION):
            compiled.forward()
            compiled.sync()
    child_result.write_text(json.dumps({**compiled.record, "forwards": 2 + warmup, "warmup": warmup, "calls": 1,
                                        "harvested_cubins": harvest_compiled_cubins()}, default=str))


def run(req: dict, result_path: Path) -> dict:
    import nsight

    child_result = result_path.with_suffix(".child.json")

    def attention_forward(step):
        _profiled_forward(req, child_result)

    profiled = nsight.analyze.kernel(**nsight_settings(req))(attention_forward)
    nsight_error, frame_file = None, None
    try:
        results = profiled()
        if results is not None:
            frame_file = str(result_path.with_suffix(".nsight-python.csv"))
            results.to_dataframe().to_csv(frame_file, index=False)
    except Exception as e:  # nsight-python's own errors; the report it wrote may still be read
        nsight_error = f"{type(e).__name__}: {e}"
    child = read_result(child_result)  # {} where the profiled process was cut short before it wrote a whole one
    report = report_path(req)
    out = {**child, "collector": "nsight-python", "nsight_python": _version(),
           "report": str(report) if report.is_file() else None, "nsight_frame": frame_file,
           "nsight_error": nsight_error}
    if not child.get("ok"):
        out.update(ok=False, error=nsight_error or "the profiled process under ncu wrote no result")
    return out


def _version() -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version("nsight-python")
    except importlib.metadata.PackageNotFoundError:
        return None


def main(argv: list[str]) -> int:
    return serve_request(argv, "softbench.audit.nsight_driver", run)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
