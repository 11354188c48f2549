"""Stand-in for Nsight Compute in tests (hand-made).

Profiling (`... --export R --log-file L ... <python> -m <driver> REQ RES`): runs the target, writes ncu-like
lines to L and a report R that names the variant. `--import R --csv ...`: prints ncu-<variant>.csv from this
folder. FAKE_NCU_MODE=real writes the H200 report h200/A0.ncu-rep instead and imports it as h200/A0.csv
(the CSV ncu 2025.3.1 printed from that report). FAKE_NCU_MODE=perm answers like a machine without counter permission; FAKE_NCU_MODE=badmetric refuses
sm__issue_active.avg.pct_of_peak_sustained_active as an unknown metric; FAKE_NCU_MODE=badmetrics refuses it and then
lts__t_sector_hit_rate.pct, one a run (ncu stops at the first unknown metric); FAKE_NCU_MODE=unnamedmetric fails on
the former without naming it; FAKE_NCU_MODE=apperror writes the report, then exits 1 as the profiled program did;
FAKE_NCU_MODE=nounits imports like an ncu older than --print-units. `--import R --page source ...` prints a SASS
page with per-instruction stall samples recorded on the H200 (sessions/stalls-h200-20261202-0716: Gluon A0's, or
FA3's for a reference kernel); FAKE_NCU_MODE=nosource fails it."""
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
args = sys.argv[1:]
if "--version" in args:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\nVersion 2025.3.1.0 (fake for tests)")
    sys.exit(0)
if "--import" in args and "source" in args:  # --page source: a SASS page recorded on the H200
    if os.environ.get("FAKE_NCU_MODE") == "nosource":
        print("==ERROR== The report holds no source counters.", file=sys.stderr)
        sys.exit(1)
    report = Path(args[args.index("--import") + 1])
    made = {} if os.environ.get("FAKE_NCU_MODE") == "real" else json.loads(report.read_text())
    recorded = HERE.parents[2] / "sessions" / "stalls-h200-20261202-0716"
    page = "fa3-fp8" if made.get("backend", "").startswith("ref-") else "gluon-a0-fp8"
    with gzip.open(recorded / f"{page}-sass.csv.gz", "rt") as f:
        sys.stdout.write(f.read())
    sys.exit(0)
if "--import" in args and os.environ.get("FAKE_NCU_MODE") == "real":
    sys.stdout.write((HERE / "h200" / "A0.csv").read_text())
    sys.exit(0)
if "--import" in args and "--print-units" in args and os.environ.get("FAKE_NCU_MODE") == "nounits":
    print("==ERROR== unrecognised option '--print-units'. Use --help for further details.", file=sys.stderr)
    sys.exit(1)
if "--import" in args:
    report = Path(args[args.index("--import") + 1])
    made = json.loads(report.read_text())
    text = (HERE / f"ncu-{made['variant']}.csv").read_text()
    if made.get("backend", "").startswith("ref-"):  # a reference kernel: a CUTLASS launch, named by its function
        text = re.sub(r'"kernel_cutlass_kernel_flash_attn[^"]*"', '"device_kernel"', text)
    sys.stdout.write(text)
    sys.exit(0)
opt = lambda name: args[args.index(name) + 1]
target = args[args.index(sys.executable):] if sys.executable in args else args[-5:]
log, report, metrics = Path(opt("--log-file")), Path(opt("--export")), opt("--metrics").split(",")
if not report.name.endswith(".ncu-rep"):  # as ncu does
    report = report.with_name(report.name + ".ncu-rep")
mode = os.environ.get("FAKE_NCU_MODE", "")
with open(log, "w") as f:
    f.write("==PROF== Connected to process 4242\n")
    refused = {"badmetric": ["sm__issue_active.avg.pct_of_peak_sustained_active"],
               "badmetrics": ["sm__issue_active.avg.pct_of_peak_sustained_active", "lts__t_sector_hit_rate.pct"]}
    unknown = [m for m in refused.get(mode, []) if m in metrics]
    if unknown:
        f.write(f"==ERROR== Failed to find metric {unknown[0]}\n")
        sys.exit(1)
    if mode == "unnamedmetric" and "sm__issue_active.avg.pct_of_peak_sustained_active" in metrics:
        f.write("==ERROR== Failed to prepare the requested metrics for collection\n")
        sys.exit(1)
code = subprocess.run(target).returncode
with open(log, "a") as f:
    if mode == "perm":
        f.write("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance "
                "Counters on the target device 0.\n==WARNING== No kernels were profiled.\n")
        sys.exit(1)
    f.write("==PROF== Profiling \"kernel_cutlass_kernel_flash_attn...\" - 0: 0%....50%....100% - 9 passes\n"
            "==PROF== Disconnected from process 4242\n")
req = json.loads(Path(target[-2]).read_text())
if mode == "real":
    shutil.copyfile(HERE / "h200" / "A0.ncu-rep", report)
else:
    sections = [args[i + 1] for i, a in enumerate(args) if a == "--section"]
    report.write_text(json.dumps({"variant": req["variant"], "backend": req["backend"], "metrics": metrics,
                                  "kernel_name": opt("--kernel-name"), "name_base": opt("--kernel-name-base"),
                                  "sections": sections}))
if mode == "apperror":  # the program failed after its launch was profiled: ncu passes its exit code on
    with open(log, "a") as f:
        f.write("==ERROR== The application returned an error code (1).\n")
    sys.exit(1)
sys.exit(code)
