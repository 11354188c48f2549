#!/usr/bin/env bash
# Issue 15, prepared 2026-12-05 13:55; sealed first: sealed/h100-replication.yaml. Every figure behind issue 15's
# goals comes from one H200. Whether they hold on the other GH100 board, the H100 SXM (the same 132 SMs and clocks,
# a 700 W cap, slower HBM3), which is the board the device tool has mostly lent since 2026-12-05 11:40. A board
# replication, not goal evidence: tools/analysis/goal_status.py reads the H200's sessions alone.
# Step 1: the six shapes at equal clock, 12 s, each with the A/A null and FA3 in the same run, h15-folded as the
#         variant, each dtype's default configuration: FP8 causal 8K, causal 16K, non-causal 8K, then BF16 the same.
# Step 2: FP8 causal 8K sustained at the power cap, h15-folded against FA3 (each kernel in its own blocks).
# Both steps refuse to run on any board but an H100, so that nothing lands beside the H200's sessions by mistake.
# Ran 2026-12-05 14:26-14:37 (step 1 twice, step 2 between; 13 sessions, 20261205T142609Z-143623Z): 8 of 8 met.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/h100_replication.sh 1`
#          (carry .gpu/b); step 2 in the next call, with the same environment.
set -uo pipefail
STEP=${1:?step 1 or 2}
PAYLOAD=
LEASE=h100-replication  # apart from other scripts' steps in the same lease (lease_step.sh)
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q "H100" || { echo "not an H100: nothing run"; exit 3; }
. tools/gpu/lease_step.sh
case "$STEP" in
1) for dtype in fp8 bf16; do
     sbt latency "${against_fa3[@]}" --dtype "$dtype" --variant h15-folded --seq 8192 --causal --budget-s 12
     sbt latency "${against_fa3[@]}" --dtype "$dtype" --variant h15-folded --seq 16384 --causal --budget-s 12
     sbt latency "${against_fa3[@]}" --dtype "$dtype" --variant h15-folded --seq 8192 --no-causal --budget-s 12
   done ;;
2) sbt latency "${sustained_fa3[@]}" "${fp8_folded[@]}" --seq 8192 ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
