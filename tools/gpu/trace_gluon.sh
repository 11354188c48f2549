#!/usr/bin/env bash
# Written 2026-12-07 11:00, before it ran. `softbench trace` settles inside the profiler range and sizes its timed
# window to 2 s since 2026-12-07 (commits 2c284c7, 1c845d1); on a GPU that default has run for FA4 only (BF16 causal
# 8K, A0 and A1, 20261207T101538Z). This step runs it through the Gluon kernel, where the two kernels of a timed call
# (the key norms and the forward, for the proof-carrying forms) and FP8's shorter calls are new to it:
#   FP8 causal 8K, A0 and h15-folded (FP8's default form); BF16 causal 8K, A0 and h15-folded; then FP8 again with
#   --no-settle, so the record of a range without settle calls is seen on a GPU (commit 78af7b9).
# Each point is a kernel at its own equilibrium under the power cap, not at equal clock; the halves check says
# whether the clock moved inside a window.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/trace_gluon.sh 1`
#          (carry .gpu/b)
set -uo pipefail
STEP=${1:?step 1}
PAYLOAD=
LEASE=trace-gluon  # apart from other scripts' steps in the same lease (lease_step.sh)
nvidia-smi --query-gpu=name,uuid --format=csv,noheader
. tools/gpu/lease_step.sh
case "$STEP" in
1) sbt trace run --backend triton --dtype fp8 --seq 8192 --causal --variants A0,h15-folded
   sbt trace run --backend triton --dtype bf16 --seq 8192 --causal --variants A0,h15-folded
   sbt trace run --backend triton --dtype fp8 --seq 8192 --causal --variants A0,h15-folded --no-settle ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
