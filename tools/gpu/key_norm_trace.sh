#!/usr/bin/env bash
# Issue 15, prepared 2026-12-04 10:50 after bf16_folded_stalls.sh (lease 10:34-10:36). h15-folded at BF16 reads
# 2.6% slower than A0 at causal 8K, 2.1% non-causal, 1% at causal 16K; under Nsight Compute its attention kernel
# takes only about 1% more cycles than A0's (20261204T103512Z), and skipping O's rescale (-rlan) gained nothing.
# What its timed call adds beside the attention kernel is the key-norm kernel (the clamp's proof, for h15-proved
# and h15-folded), whose cost would fall with the length as measured. Step 1: `softbench trace run` (Nsight
# Systems) of A0 and h15-folded at BF16 causal 8K and 16K and at FP8 causal 8K under the defaults: each kernel's
# median beside the host's call latency.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/key_norm_trace.sh 1`
#          (carry .gpu/b)
set -uo pipefail
STEP=${1:?step 1}
PAYLOAD=
LEASE=key-norm-trace  # apart from other scripts' steps in the same lease (lease_step.sh)
. tools/gpu/lease_step.sh
case "$STEP" in
1) sb trace run --backend triton --dtype bf16 --seq 8K --seq 16K --variants A0,h15-folded
   sb trace run --backend triton --dtype fp8 --seq 8K --variants A0,h15-folded ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
