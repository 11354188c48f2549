#!/usr/bin/env bash
# Issue 15, prepared 2026-12-03 09:40 without a GPU. BF16 A0 reads 0.940 of FA3 at causal 8K under the default
# (20261203T082058Z) and the exponential-free ceiling 0.999 (20261202T174143Z), the latter measured before masked
# tiles compared each score once (which gave FP8 about 1.2 points). Screens (12 s interleavings against FA3, causal
# 8K) of what the FP8 measurements since then suggest at BF16, and of whether a persistent grid helps BF16 at all
# before a dynamic one is built:
# Step 1: BF16 noexp under the default (the ceiling now); BF16 h15-sat under hg2, under -pt (hg16, static rounds)
# and under the named-barrier ping-pong (-ppn) with the default's options; FP8 h15-folded under the default with
# hg2 (-g1: A0's strongest configuration).
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/bf16_screens.sh 1`
set -uo pipefail
STEP=${1:?step 1}
PAYLOAD=
. tools/gpu/lease_step.sh
short=("${against_fa3[@]}" --seq 8192 --budget-s 12)
case "$STEP" in
1) sb latency "${short[@]}" --dtype bf16 --variant noexp
   sb latency "${short[@]}" "${bf16_sat[@]}" --triton-config gluon-n128s2-c240l24-hg2-rl-ltt-tb
   sb latency "${short[@]}" "${bf16_sat[@]}" --triton-config gluon-n128s2-c240l24-hg16-pt-rl-ltt-tb
   sb latency "${short[@]}" "${bf16_sat[@]}" --triton-config gluon-n128s2-c240l24-hg8-ppn-rl-ltt-tb
   sb latency "${short[@]}" "${fp8_folded[@]}" --triton-config gluon-n128s2-c240l24-hg2-g1-rla-lmt-tb ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "step$STEP"
