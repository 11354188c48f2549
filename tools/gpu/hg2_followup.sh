#!/usr/bin/env bash
# Issue 15, prepared 2026-12-03 06:35 without a GPU (the session's device time was spent). On 2026-12-03 handing
# the query blocks out two heads at a time gave h15-folded 1.084-1.088 of FA3 at FP8 causal 8K at equal clock under
# two consumers -rla-lmt-tb (hg8: 1.072-1.075; sessions 20261203T062342Z, 062506Z), measured at that shape only.
# Step 1: the same configuration at non-causal 8K, causal 16K and sustained at the cap at causal 8K, with its gates
# (program order changes no output bit, so hg8's gates carry over; these make that a measurement), then hg2 against
# hg8 A0 at causal 8K for the exact kernel's share.
# Step 2: where -pt's time goes: Nsight Compute source stalls of h15-folded and h15-noclamp under -pt at FP8 causal
# 8K (their loops are the same code to within 6 instructions, their speeds 7 points apart), FA3 beside.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/hg2_followup.sh 1`
#          (carry .gpu/b); step 2 while warm: `. /tmp/gpu-site/env.sh && bash tools/gpu/hg2_followup.sh 2`
set -uo pipefail
STEP=${1:?step 1 or 2}
PAYLOAD=
. tools/gpu/lease_step.sh
hg2=gluon-n128s2-c240l24-hg2-rla-lmt-tb
pt=gluon-n128s2-c240l24-hg16-pt-rla-lmt-tb
case "$STEP" in
1) sb gates --backend triton --dtype fp8 --causal --variant h15-folded --triton-config $hg2
   for seq in "--seq 8192 --no-causal" "--seq 16384"; do
     sb latency "${against_fa3[@]}" "${fp8_folded[@]}" $seq --triton-config $hg2
   done
   sb latency --backend triton --null --reference fa3 "${fp8_folded[@]}" --seq 8192 --protocol sustained \
     --triton-config $hg2 ;;
2) audit=(python3 -m softbench audit --backend triton --seq 8192 --causal --reference fa3 --source-stalls --out "$DIR")
   timeout 280 "${audit[@]}" --dtype fp8 --variants h15-folded,h15-noclamp --triton-config $pt 2>&1 | grep -v "━" \
     | tail -14 ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "step$STEP"
