#!/usr/bin/env bash
# Issue 15, prepared 2026-12-06 04:15; sealed first: sealed/h100-fill.yaml. The fallback of a lease asked for as
# `nvidia-h200` that brings an H100: the H200's sealed steps (grid_dependency.sh, split_check.sh) need an H200, so
# an H100 fills the two thinnest rows of its own goal table (README, `goal_status.py --gpu "NVIDIA H100 80GB HBM3"`)
# instead of idling: BF16 causal 16K, where A0 against FA3 is "mean only" over three sessions, and FP8 causal 8K
# sustained at the power cap, one session. Each dtype's default configuration, the A/A null and FA3 in every run.
# Step 1 (H100): three BF16 causal 16K runs at equal clock (12 s, h15-folded as the variant: the row read is A0
#         against FA3), then two FP8 causal 8K h15-folded runs sustained at the power cap.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/h100_fill.sh 1`
#          (carry .gpu/b)
set -uo pipefail
STEP=${1:?step 1}
PAYLOAD=
LEASE=h100-fill  # apart from other scripts' steps in the same lease (lease_step.sh)
nvidia-smi --query-gpu=name --format=csv,noheader
. tools/gpu/lease_step.sh
case "$STEP" in
1) for _ in 1 2 3; do
     sbt latency "${against_fa3[@]}" --dtype bf16 --variant h15-folded --seq 16384 --causal --budget-s 12
   done
   for _ in 1 2; do
     sbt latency "${sustained_fa3[@]}" "${fp8_folded[@]}" --seq 8192
   done ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
