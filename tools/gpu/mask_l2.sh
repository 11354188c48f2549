#!/usr/bin/env bash
# Issue 15, prepared 2026-12-03 08:00-08:40 without a GPU.
# (a) One comparison per score in masked tiles (triton_attn._kept): causal keeps key <= min(row, seq - 1), one
#     ISETP and one FSEL per score, where (key < seq) and (key <= row) took a second FSEL per score and the
#     comparisons per column besides. Cross-compiled for sm_90a the masked branch of the key loop is 70-72
#     instructions shorter (h15-folded under -hg2-rla-lmt-tb 869 to 797 for both branches; the unmasked branch
#     and every non-causal loop unchanged). The same operator: outputs should not change by a bit.
# (b) hg2 at the other shapes and sustained (hg2_followup.sh step 1, which this replaces).
# (c) L2 hit rate and DRAM bytes (new in the audit's counters) for the two open questions: why hg2 beats hg8 at
#     causal 8K (the keys' residency in L2 is the untested reading) and why -pt loses 6-8 points even at
#     non-causal 8K, where no block is short (its loop is the one-block kernel's to within 3 instructions).
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/mask_l2.sh 1`
#          (carry .gpu/b); steps 2 and 3 while warm: `. /tmp/gpu-site/env.sh && bash tools/gpu/mask_l2.sh 2`
set -uo pipefail
STEP=${1:?step 1 to 3}
PAYLOAD=
. tools/gpu/lease_step.sh
hg2=gluon-n128s2-c240l24-hg2-rla-lmt-tb
hg8=gluon-n128s2-c240l24-hg8-rla-lmt-tb
hg16=gluon-n128s2-c240l24-hg16-rla-lmt-tb
pt=gluon-n128s2-c240l24-hg16-pt-rla-lmt-tb
fp8_default=gluon-n128s2-c240l24-hg8-g1-rla-lmt-tb
case "$STEP" in
1) timeout 170 python3 tools/gpu/gluon_probe.py "$DIR/probe-mask-fp8" --only=fp8 --checks-only \
     --check-shapes=0,1,2,4,6 --check-configs=$hg2,$fp8_default --check-variants=A0,h15-folded
   sb gates --backend triton --dtype fp8 --causal --variant h15-folded --triton-config $hg2
   for seq in "--seq 8192" "--seq 8192 --no-causal" "--seq 16384"; do
     sb latency "${against_fa3[@]}" "${fp8_folded[@]}" $seq --triton-config $hg2
   done ;;
2) sb latency --backend triton --null --reference fa3 "${fp8_folded[@]}" --seq 8192 --protocol sustained \
     --triton-config $hg2
   timeout 100 python3 tools/gpu/gluon_probe.py "$DIR/probe-mask-bf16" --only=bf16 --checks-only \
     --check-shapes=0,2,4 --check-configs=gluon-n128s2-c240l24-hg8-rl-ltt-tb --check-variants=A0,h15-sat
   sb latency "${against_fa3[@]}" "${bf16_sat[@]}" --seq 8192 ;;
3) audit=(python3 -m softbench audit --backend triton --dtype fp8 --seq 8192 --source-stalls --out "$DIR")
   for cfg in $hg16 $pt; do
     timeout 110 "${audit[@]}" --no-causal --variants A0 --triton-config $cfg 2>&1 | grep -v "━" | tail -30
   done
   for cfg in $hg2 $hg8 $pt; do
     timeout 110 "${audit[@]}" --causal --variants h15-folded --triton-config $cfg 2>&1 | grep -v "━" | tail -30
   done ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "step$STEP"
