#!/usr/bin/env bash
# Issue 15, prepared 2026-12-03 18:00 without a GPU; sealed first: sealed/bf16-two-programs.yaml.
# BF16 with two programs per SM (one consumer each, 64-key tiles: 82 KB of shared memory), the FP8 default's
# arrangement, never timed at 16 bits: a 12 s screen against FA3 at causal 8K with h15-sat beside A0.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/bf16_two_programs.sh 1`
set -uo pipefail
STEP=${1:?step 1}
PAYLOAD=
. tools/gpu/lease_step.sh
case "$STEP" in
1) sb latency "${against_fa3[@]}" "${bf16_sat[@]}" --seq 8192 --budget-s 12 \
     --triton-config gluon-n64s2-c240l24-hg8-g1-rl-ltt-tb ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "step$STEP"
