#!/usr/bin/env bash
# Correctness gates of FA4's Rowmax-H15 kernel (A1) against stock FA4 (A0) on the H200 (sm_90), BF16, causal and
# non-causal (batch 1, 4 heads, head dim 128; one-tile gate at 128 keys, multi-tile gates at 512), plus a negative
# control: the no-exponential variant must FAIL the gates on the same hardware, or the gates prove nothing.
# Run from the project root on the GPU host after `. /tmp/gpu-site/env.sh`; sessions go to ${1:-sessions}.
# Each run: two worker processes import FA4 in parallel (~9 s), one compile per kernel (2-5 s), 5 forwards per
# kernel, about 5 s of FP64 reference work on the CPU: about 25 s a run, about 75-90 s for the three runs.
# Each session keeps its readbacks (readback-*.pt, about 10 MB a session) beside gates.json and summary.json.
set -uo pipefail
OUTDIR=${1:-sessions}
sb() { python3 -m softbench "$@"; }
status=0

sb gates --backend fa4 --dtype bf16 --causal --out "$OUTDIR" || { echo "A1 causal gates: exit $?"; status=1; }
sb gates --backend fa4 --dtype bf16 --no-causal --out "$OUTDIR" || { echo "A1 non-causal gates: exit $?"; status=1; }

# negative control: exit code 1 (gates failed) is the expected outcome here
sb gates --backend fa4 --dtype bf16 --causal --variant noexp --out "$OUTDIR"
code=$?
if [ "$code" -eq 1 ]; then
  echo "noexp control: failed the gates, as it must"
else
  echo "noexp control: exit code $code, expected 1 (gates failed)"; status=1
fi
exit $status
