"""Read one `.ncu-rep` report with NVIDIA's ncu_report module and write its counter table as CSV.

Usage: python -m softbench.audit.read_report MODULE_DIR|- REPORT OUT.csv

MODULE_DIR is an Nsight Compute install's extras/python (its own ncu_report.py); `-` takes the ncu-report
package installed in this Python. The audit runs this in a process of its own (softbench.audit.readers says
why). Exit code 0 with OUT written, or 5 with one line on stderr."""

from __future__ import annotations

import sys
from pathlib import Path


def load_module(module_dir: str):
    if module_dir != "-":
        sys.path.insert(0, module_dir)
    import ncu_report

    where = Path(ncu_report.__file__).resolve()
    if module_dir != "-" and where.parent != Path(module_dir).resolve():
        raise RuntimeError(f"ncu_report was imported from {where}, not from {module_dir}")
    if module_dir == "-" and where.name != "__init__.py":
        # an ncu_report.py on PYTHONPATH would pass for the package; the session must say which one read
        raise RuntimeError(f"the ncu_report imported is {where}, not the ncu-report package")
    return ncu_report


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m softbench.audit.read_report MODULE_DIR|- REPORT OUT.csv", file=sys.stderr)
        return 2
    module_dir, report, out = argv
    from softbench.audit import counters, readers

    try:
        module = load_module(module_dir)
        context = module.load_report(report)
        frame = counters.frame_from_context(context)
    except Exception as e:  # the native reader's errors have no common type; the parent records the line
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 5
    if frame.empty:
        print(f"{report} holds no profiled launch", file=sys.stderr)
        return 5
    readers.write_frame(frame, Path(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
