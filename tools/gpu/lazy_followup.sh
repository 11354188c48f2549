#!/usr/bin/env bash
# Issue 15, after tools/gpu/lazy_rescale.sh (15:21-15:33): -rl is now both dtypes' default. This lease repeats the
# two causal 8K runs under the defaults as resolved (no --triton-config: the run's label says what ran) and
# screens BF16 configurations around -rl against FA3.
# Step 1: BF16 -rl-ltt, -ppn-rl, n128s3-rl checked against the simulation and their plain forms (A0, h15-sat); FP8
# and BF16 causal 8K under the defaults, full interleavings; the checked BF16 configurations and the default,
# 12 s interleavings each. (Its step 2, the audits of the new defaults, did not fit in the lease: it is
# tools/gpu/after_rl_screens.sh's step 2 now.)
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/lazy_followup.sh 1`
#          (carry .gpu/b)
# Predicted and sealed first (sealed/gluon-lazy-defaults.yaml): score with
# `softbench evaluate sealed/gluon-lazy-defaults.yaml --sessions sessions`.
set -uo pipefail
STEP=${1:?step 1}
PAYLOAD=
. tools/gpu/lease_step.sh
screens=(gluon-n128s2-c240l24-hg8-rl-ltt-tb gluon-n128s2-c240l24-hg8-ppn-rl-tb gluon-n128s3-c240l24-hg8-rl-tb)
case "$STEP" in
1) timeout 150 python3 tools/gpu/gluon_probe.py "$DIR/probe-rl-screens-bf16" --only=bf16 --checks-only \
     --check-shapes=0,2 --check-configs="$(IFS=,; echo "${screens[*]}")" --check-variants=A0,h15-sat \
     && touch /tmp/sb/screens-ok
   sb latency "${against_fa3[@]}" "${fp8_folded[@]}" --seq 8192
   sb latency "${against_fa3[@]}" "${bf16_sat[@]}" --seq 8192
   if [ -f /tmp/sb/screens-ok ]; then
     for cfg in gluon-n128s2-c240l24-hg8-rl-tb "${screens[@]}"; do
       sb latency "${against_fa3[@]}" "${bf16_sat[@]}" --seq 8192 --budget-s 12 --triton-config $cfg
     done
   else echo "the screened configurations failed their checks: not timed"; fi ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "step$STEP"
