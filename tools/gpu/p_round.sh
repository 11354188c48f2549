#!/usr/bin/env bash
# Issue 15, prepared 2026-12-04 03:40-04:00 without a GPU; sealed first: sealed/p-round.yaml.
# A 16-bit P rounded at P.V's wgmma (-pm): carried across the loop in FP32 and converted just before P.V is issued,
# as FP8 always is. The BF16 A0 hot loop under -mlf loses its 32 PRMTs (the cast to packed pairs and the move into
# the operand's order become one conversion) and keeps no conversion between P.V's wait and the next Q.K^T: 452
# instructions per tile and thread against 484 (sm_90a cross-compile, tests/test_p_round.py). Step 1: the outputs
# against the simulation and, bit for bit, against the plain kernel (A0, h15-sat; -pm and -ro-pm under -mlf), then
# BF16 causal 8K at equal clock against FA3 in 12 s interleavings: the default, -pm, -ro-pm. Step 2: the three BF16
# shapes with 30 s interleavings under the configuration step 1 favours (its label the second argument).
#   host:  `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/p_round.sh 1` (carry
#          .gpu/b) after call 1 `bash .gpu/a/install.sh` (carry .gpu/a); step 2 while warm:
#          `. /tmp/gpu-site/env.sh && bash tools/gpu/p_round.sh 2 gluon-n128s2-c240l24-hg8-rl-ltt-pm-tb-mlf`
set -uo pipefail
STEP=${1:?step 1, 2 or 3}
PAYLOAD=
LEASE=p-round  # apart from other scripts' steps in the same lease (lease_step.sh)
. tools/gpu/lease_step.sh
bf16=gluon-n128s2-c240l24-hg8-rl-ltt-tb-mlf
pm=gluon-n128s2-c240l24-hg8-rl-ltt-pm-tb-mlf
ro_pm=gluon-n128s2-c240l24-hg8-rl-ro-ltt-pm-tb-mlf
case "$STEP" in
1) timeout 150 python3 tools/gpu/gluon_probe.py "$DIR/probe-p-round-bf16" --only=bf16 --checks-only \
     --check-shapes=0,1,4,5 --check-configs=$pm,$ro_pm --check-variants=A0,h15-sat
   for c in $bf16 $pm $ro_pm; do
     sb latency "${against_fa3[@]}" "${bf16_sat[@]}" --seq 8192 --budget-s 12 --triton-config $c
   done ;;
2) for seq in "--seq 8192" "--seq 8192 --no-causal" "--seq 16384"; do
     sb latency "${against_fa3[@]}" "${bf16_sat[@]}" $seq --triton-config "${2:?the label step 1 favours}"
   done ;;
# Step 3 (written 04:25, after the 16-bit default took -ro-pm): that default against its plain form at head dim 64
# and on the shapes with more query blocks than programs at once, BF16 and FP16 (steps 1 and 2 checked head dim 128
# at BF16 only)
3) timeout 150 python3 tools/gpu/gluon_probe.py "$DIR/probe-p-round-default" --only=bf16,fp16 --checks-only \
     --check-shapes=2,3,6,7 --check-configs=$ro_pm --check-variants=A0,h15-sat ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
