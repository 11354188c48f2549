#!/usr/bin/env bash
# Issue 15, prepared 2026-12-04 12:38 after tensor_idle.sh (lease 12:27-12:30); sealed first:
# sealed/deferred-epilogue.yaml. Both kernels' key loops leave the tensor core idle about 8.9% of the time at BF16;
# A0's blocks leave about 2.3 tiles' worth idle each, FA3's 2.1 (tools/analysis/tensor_idle_fit.py), and that
# 0.2 tile is A0's deficit at causal 16K. -pde (GluonConfig.schedule "dynamic-deferred") writes each block's O only
# after the next block's first Q.K^T is issued, so the tensor core works through the epilogue (the same output bit
# for bit; sm_90a cross-compile: loop 454 against 452 instructions, spill stores 36 against 4 outside it).
# Step 1: -pde's outputs against the one-block kernel and the simulation (BF16 and FP8 defaults with -pde, A0 and
#         h15-folded, ragged shapes and three launches in a row at 8K); only if every check passes: 12 s screens
#         against FA3 at BF16 causal 8K and FP8 causal 8K.
# Step 2 (only after step 1 passed): BF16 causal 16K, 30 s, two processes per kernel: -pde, then the -pd default.
# As run (12:40-12:44): step 1's BF16 probe printed every check ok (14 of 14 against the simulation and equal to the
# one-block kernel, 3 launches at 8K equal) but ran out of its 150 s before writing its record, so the chain stopped.
# Step 3, then, in what device time was left: both probes on three shapes with 200 s each, the two screens, and
# BF16 causal 16K under -pde (30 s, two processes per kernel) without its -pd partner.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/deferred_epilogue.sh 1`
#          (carry .gpu/b), and while the host is still held `. /tmp/gpu-site/env.sh && bash tools/gpu/deferred_epilogue.sh 2`
set -uo pipefail
STEP=${1:?step 1, 2 or 3}
PAYLOAD=
LEASE=deferred-epilogue  # apart from other scripts' steps in the same lease (lease_step.sh)
. tools/gpu/lease_step.sh
bf16_pde=gluon-n128s2-c240l24-hg4-pde-rl-ro-ltt-pm-tb-mlf
bf16_pd=gluon-n128s2-c240l24-hg4-pd-rl-ro-ltt-pm-tb-mlf
fp8_pde=gluon-n128s2-c240l24-hg8-g1-pde-rla-lmt-tb-mlf
bf16_folded=(--dtype bf16 --variant h15-folded)
case "$STEP" in
1) timeout 150 python3 tools/gpu/gluon_probe.py "$DIR/probe-bf16" --only=bf16 --checks-only \
     --check-shapes=0,1,2,4,5,6,7 --check-configs=$bf16_pde --check-variants=A0,h15-folded --repeat-equal=3 \
     && timeout 150 python3 tools/gpu/gluon_probe.py "$DIR/probe-fp8" --only=fp8 --checks-only \
     --check-shapes=0,1,2,4,5,6,7 --check-configs=$fp8_pde --check-variants=A0,h15-folded --repeat-equal=3 \
     && touch "$DIR/checks-passed" \
     && sbt latency "${against_fa3[@]}" "${bf16_folded[@]}" --seq 8192 --budget-s 12 --triton-config $bf16_pde \
     && sbt latency "${against_fa3[@]}" "${fp8_folded[@]}" --seq 8192 --budget-s 12 --triton-config $fp8_pde ;;
3) timeout 200 python3 tools/gpu/gluon_probe.py "$DIR/probe-bf16" --only=bf16 --checks-only \
     --check-shapes=0,2,4 --check-configs=$bf16_pde --check-variants=A0,h15-folded --repeat-equal=2 \
     && timeout 200 python3 tools/gpu/gluon_probe.py "$DIR/probe-fp8" --only=fp8 --checks-only \
     --check-shapes=0,2,4 --check-configs=$fp8_pde --check-variants=A0,h15-folded --repeat-equal=2 \
     && sbt latency "${against_fa3[@]}" "${bf16_folded[@]}" --seq 8192 --budget-s 12 --triton-config $bf16_pde \
     && sbt latency "${against_fa3[@]}" "${fp8_folded[@]}" --seq 8192 --budget-s 12 --triton-config $fp8_pde \
     && sbt latency "${against_fa3[@]}" "${bf16_folded[@]}" --seq 16384 --processes 2 --triton-config $bf16_pde ;;
2) for cfg in $bf16_pde $bf16_pd; do
     sbt latency "${against_fa3[@]}" "${bf16_folded[@]}" --seq 16384 --processes 2 --triton-config $cfg
   done ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
