#!/usr/bin/env bash
# Issue 15: h15-folded's anchor moved lazily (-rla, GluonConfig.rescale "lazy-anchor"), built 2026-12-02
# 18:00-18:25 without a GPU. Under the -rl defaults A0's maximum moves lazily and O's multiply is jumped over in
# 87% of a warp's tiles at FP8 causal 8K, h15-folded's (exact maximum) in 39%; the exponential-free control, which
# saves only h15-folded's shift per score, ran at 1.145 of FA3 against h15-folded's 1.048 (20261202T174104Z,
# 173207Z). -rla moves h15-folded's anchor as -rl moves A0's (2 octaves, offset 2^6); A0 is -rl's, bit for bit.
# Cross-compiled for sm_90a: 12 more instructions per loop (both branches), 64 multiplies jumped, no spill.
# Step 1: FP8 -g1-rla-lmt-tb checked against the simulation with the same lazy anchor (A0, h15-folded); FP8
# h15-folded under it timed against FA3 at causal 8K, non-causal 8K and causal 16K, its gates causal and not, and
# causal 8K sustained at the power cap.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/lazy_anchor.sh 1`
#          (carry .gpu/b)
# Predicted and sealed first (sealed/gluon-lazy-anchor.yaml): score with
# `softbench evaluate sealed/gluon-lazy-anchor.yaml --sessions sessions`.
set -uo pipefail
STEP=${1:?step 1}
PAYLOAD=
. tools/gpu/lease_step.sh
rla=gluon-n128s2-c240l24-hg8-g1-rla-lmt-tb
case "$STEP" in
1) timeout 110 python3 tools/gpu/gluon_probe.py "$DIR/probe-rla-fp8" --only=fp8 --checks-only \
     --check-shapes=0,1,2 --check-configs=$rla --check-variants=A0,h15-folded && touch /tmp/sb/rla-ok
   if [ -f /tmp/sb/rla-ok ]; then
     sb latency "${against_fa3[@]}" "${fp8_folded[@]}" --seq 8192 --triton-config $rla
     sb gates --backend triton --dtype fp8 --causal --variant h15-folded --triton-config $rla
     sb gates --backend triton --dtype fp8 --no-causal --variant h15-folded --triton-config $rla
     for seq in "--seq 8192 --no-causal" "--seq 16384"; do
       sb latency "${against_fa3[@]}" "${fp8_folded[@]}" $seq --triton-config $rla
     done
     sb latency --backend triton --null --reference fa3 "${fp8_folded[@]}" --seq 8192 --protocol sustained \
       --triton-config $rla
   fi ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "step$STEP"
