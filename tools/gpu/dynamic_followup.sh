#!/usr/bin/env bash
# Issue 15, prepared 2026-12-04 07:00 without a GPU (the session's device time was spent); sealed first:
# sealed/dynamic-followup.yaml. What the dynamic schedule (-pd, both defaults since 06:10) still lacks.
# Step 1: tools/gpu/pd_diagnose.py (where -pd's outputs leave the one-block kernel's at FP8 with two consumers, which
# gluon_attn refuses until the cause is known: launches against each other, an output filled with NaN, which blocks
# and which consumer's rows, one option changed at a time); then the gates under the new FP8 and BF16 defaults
# (h15-folded causal and not, h15-sat causal), whose outputs equal the one-block kernel's, whose gates passed.
# Step 2: the FP8 default sustained at the power cap (issue 15's second quantity for h15-folded, 1.111-1.117 of FA3
# before -pd), FP8 causal 8K at equal clock once more, and BF16 causal 8K and 16K for 30 s once more (0.992-0.993).
# Step 3 (sealed apart: sealed/dynamic-orders.yaml): the program order under -pd, 12 s screens. With the counter the
# programs in flight work on consecutive blocks, so a smaller head group keeps fewer heads' keys in the L2 at once
# (hg2 gave FP8 h15-folded 1-1.5 points over hg8 under one program per block, 2026-12-03): BF16 causal 8K under hg2,
# hg4 and hg16 beside hg8, FP8 causal 8K (h15-folded) under hg2 and hg4 beside hg8.
# Steps 4 and 5, prepared at 07:25 after steps 1-3: step 1 found -pd bit-equal to its one-block kernel on its own
# inputs, so step 4 repeats the probe of 05:40 on the probe's inputs (pd_diagnose.py --probe-data: the failing
# configuration with -pd and without, each against plain()). Step 5 (sealed: sealed/hg4.yaml): BF16 under
# -pd with hg4 (0.995 of FA3 in step 3's 12 s screen, hg8 0.986) for 30 s at causal 8K and 16K and non-causal 8K.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/dynamic_followup.sh 1`
#          (carry .gpu/b)
set -uo pipefail
STEP=${1:?step 1 to 5}
PAYLOAD=
LEASE=dynamic-followup  # apart from other scripts' steps in the same lease (lease_step.sh)
. tools/gpu/lease_step.sh
case "$STEP" in
1) timeout 300 python3 tools/gpu/pd_diagnose.py "$DIR/pd-diagnose"
   sb gates --backend triton --dtype fp8 --causal --variant h15-folded
   sb gates --backend triton --dtype fp8 --no-causal --variant h15-folded
   sb gates --backend triton --dtype bf16 --causal --variant h15-sat ;;
2) sb latency --backend triton --null --reference fa3 "${fp8_folded[@]}" --seq 8192 --protocol sustained
   sb latency "${against_fa3[@]}" "${fp8_folded[@]}" --seq 8192 --target-pp 0.05
   sb latency "${against_fa3[@]}" "${bf16_sat[@]}" --seq 8192
   sb latency "${against_fa3[@]}" "${bf16_sat[@]}" --seq 16384 ;;
3) for hg in 8 2 4 16; do
     sb latency "${against_fa3[@]}" "${bf16_sat[@]}" --seq 8192 --budget-s 12 \
       --triton-config gluon-n128s2-c240l24-hg$hg-pd-rl-ro-ltt-pm-tb-mlf
   done
   for hg in 8 2 4; do
     sb latency "${against_fa3[@]}" "${fp8_folded[@]}" --seq 8192 --budget-s 12 \
       --triton-config gluon-n128s2-c240l24-hg$hg-g1-pd-rla-lmt-tb-mlf
   done ;;
4) timeout 420 python3 tools/gpu/pd_diagnose.py "$DIR/pd-diagnose" --probe-data ;;
5) hg4=(--triton-config gluon-n128s2-c240l24-hg4-pd-rl-ro-ltt-pm-tb-mlf)
   sb latency "${against_fa3[@]}" "${bf16_sat[@]}" --seq 8192 "${hg4[@]}"
   sb latency "${against_fa3[@]}" "${bf16_sat[@]}" --seq 16384 "${hg4[@]}"
   sb latency "${against_fa3[@]}" "${bf16_sat[@]}" --seq 8192 --no-causal "${hg4[@]}" ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
