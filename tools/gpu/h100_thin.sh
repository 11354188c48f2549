#!/usr/bin/env bash
# Issue 15, prepared 2026-12-06 09:08; sealed first: sealed/h100-thin.yaml. A lease asked for as `nvidia-h200`
# brought an H100 again (08:55 UTC; split_check.sh 1 and grid_dependency.sh 1 ran on it for their H100
# predictions), so the rest of its device time fills the rows of the H100's goal table that rest on fewest sessions
# (README, `goal_status.py --gpu "NVIDIA H100 80GB HBM3"` at 09:06): BF16 non-causal 8K, where A0 against FA3 rests
# on two sessions; FP8 causal 16K on four; and the exponential-free ceiling beside the sustained FP8 form goal,
# never timed under the FP8 default on this board. Each dtype's default, the A/A null and FA3 in every run.
# Step 1 (H100): BF16 non-causal 8K twice and FP8 causal 16K once at equal clock (12 s, h15-folded as the variant:
#         the rows read are A0 against FA3), then FP8 causal 8K noexp sustained at the power cap, twice.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/h100_thin.sh 1`
#          (carry .gpu/b)
set -uo pipefail
STEP=${1:?step 1}
PAYLOAD=
LEASE=h100-thin  # apart from other scripts' steps in the same lease (lease_step.sh)
nvidia-smi --query-gpu=name --format=csv,noheader
. tools/gpu/lease_step.sh
case "$STEP" in
1) for _ in 1 2; do
     sbt latency "${against_fa3[@]}" --dtype bf16 --variant h15-folded --seq 8192 --no-causal --budget-s 12
   done
   sbt latency "${against_fa3[@]}" "${fp8_folded[@]}" --seq 16384 --causal --budget-s 12
   for _ in 1 2; do
     sbt latency "${sustained_fa3[@]}" --dtype fp8 --variant noexp --seq 8192
   done ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
