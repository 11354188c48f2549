#!/usr/bin/env bash
# Issue 20 on the H200: `softbench audit` with its counters read through NVIDIA's ncu_report, checked against
# the CSV parser on the same report, three ways:
#   1. --collector ncu, --counter-reader auto: the ncu-report package reads; the install's module and the CSV check
#   2. --collector ncu, --counter-reader host: Nsight Compute 2025.3.1's own extras/python/ncu_report reads
#   3. --collector nsight-python (0.9.6): nsight-python runs ncu; the package reads, the CSV and nsight-python's
#      own DataFrame check
# FA4, BF16, causal 8K, variants A0 and A1: the audit builds FA4 only, and on sm_90 FA4 has no FP8 path and no
# h15-sat variant (both are the Triton/Gluon kernels'), so FP8 and h15-sat are not audited here.
# Wheels: tools/gpu/stage_counters.sh writes .whl/ here; carry it (it is git-ignored). Then, from the project
# root on the GPU host after `. /tmp/gpu-site/env.sh`:  bash tools/gpu/audit_counters.sh OUTDIR
# Runtime: about 5 minutes (2 variants x 3 audits; the nsight-python audit starts each variant's process twice).
set -uo pipefail
OUTDIR=${1:?usage: bash tools/gpu/audit_counters.sh OUTDIR}
mkdir -p "$OUTDIR"
export PATH="$PATH:/usr/local/cuda/bin"   # cuobjdump, nvdisasm and ncu live there on the GPU host
export COLUMNS=${COLUMNS:-230}
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || echo "wheel install failed"
fi
export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
python3 - <<'EOF'
import importlib.metadata as md, shutil, subprocess
for name in ("ncu-report", "nsight-python", "nvtx", "deepdiff", "matplotlib"):
    try:
        print(f"{name}: {md.version(name)}")
    except md.PackageNotFoundError:
        print(f"{name}: not installed")
ncu = shutil.which("ncu")
print("ncu:", ncu, subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1] if ncu else "")
from softbench.audit import readers
print("readers found:", [r.describe() for r in readers.available(ncu, subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout if ncu else None)])
EOF
sb() { python3 -m softbench "$@" 2> >(grep -v '━' >&2); }
common=(--backend fa4 --dtype bf16 --seq 8K --causal --variants A0,A1 --out "$OUTDIR")
t0=$SECONDS
for how in "--counter-reader auto" "--counter-reader host" "--collector nsight-python"; do
  echo; echo "=== audit $how"
  # shellcheck disable=SC2086
  sb audit "${common[@]}" $how
  echo "audit exit code ($how): $?"
done
echo; echo "=== check: which reader gave the numbers, and did every other reader of the same report agree"
python3 - "$OUTDIR" <<'EOF'
import json, sys
from pathlib import Path
sessions = sorted(Path(sys.argv[1]).glob("*-audit-bf16-8K-causal-*"))[-3:]
expect = [("ncu", "ncu-report"), ("ncu", "host"), ("nsight-python", "ncu-report")]
bad = 0
for path, (collector, reader) in zip(sessions, expect):
    s = json.loads((path / "summary.json").read_text())
    print(f"{path.name}: collector {s.get('collector')}")
    if s.get("collector") != collector:
        print(f"  FAIL: collector {s.get('collector')}, expected {collector}"); bad += 1
    for v in s.get("variants", []):
        got = (s.get("counter_reader") or {}).get(v, {})
        checks = (s.get("counter_check") or {}).get(v, {})
        line = ", ".join(f"{n} {'equal' if c['equal'] else 'DIFFERS'} ({c['compared']})" for n, c in checks.items())
        print(f"  {v}: read by {got.get('name')} {got.get('version')} at {got.get('location')}; {line or 'no check'}")
        for n, c in checks.items():
            for d in c["differences"][:5]:
                print(f"    {n}: {d}")
        need = {"csv"} | ({"nsight-python"} if collector == "nsight-python" else set())
        if got.get("name") != reader or not need <= set(checks) or not all(c["equal"] for c in checks.values()):
            print(f"  FAIL [{v}]: expected {reader} checked by {sorted(need)}, all equal"); bad += 1
        for step, msg in ((s.get("errors") or {}).get(v) or {}).items():
            print(f"  error [{v} {step}]: {msg}")
    for v, fails in (s.get("counter_reader_failures") or {}).items():
        print(f"  reader failures [{v}]: {fails}")
print("counter check:", "PASS" if not bad and len(sessions) == 3 else f"FAIL ({bad} problems, {len(sessions)} sessions)")
EOF
echo "audit_counters.sh took $((SECONDS - t0)) s"
