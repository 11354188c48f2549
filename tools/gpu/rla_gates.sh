#!/usr/bin/env bash
# Issue 15, prepared 2026-12-02 18:20 without a GPU (the session's device time was spent): what the two-consumer
# -rla figures still lack. h15-folded under gluon-n128s2-c240l24-hg8-rla-lmt-tb read 1.072-1.075 of FA3 at FP8
# causal 8K at equal clock and 1.100 sustained (20261202T175907Z-180335Z), and matches the simulation with the same
# lazy anchor (sessions/gluon-probe-h200-20261202-1759-rla2-fp8), but its gates were not run (the one-consumer
# configuration's, with the same weight code, pass: 175303Z, 175316Z).
# Step 1: its gates, causal and not; then the sustained run repeated and the equal-clock one at causal 8K, so that
# the sustained goal's figure stands on a configuration whose gates pass in the same lease.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/rla_gates.sh 1`
#          (carry .gpu/b)
set -uo pipefail
STEP=${1:?step 1}
PAYLOAD=
. tools/gpu/lease_step.sh
two=gluon-n128s2-c240l24-hg8-rla-lmt-tb
case "$STEP" in
1) sb gates --backend triton --dtype fp8 --causal --variant h15-folded --triton-config $two
   sb gates --backend triton --dtype fp8 --no-causal --variant h15-folded --triton-config $two
   sb latency --backend triton --null --reference fa3 "${fp8_folded[@]}" --seq 8192 --protocol sustained \
     --triton-config $two
   sb latency "${against_fa3[@]}" "${fp8_folded[@]}" --seq 8192 --triton-config $two ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "step$STEP"
