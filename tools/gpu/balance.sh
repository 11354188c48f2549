#!/usr/bin/env bash
# Issue 15, prepared 2026-12-03 08:35-08:50 without a GPU, after tools/gpu/mask_l2.sh.
# Step 1: (a) h15-folded under two consumers -hg2-rla-lmt-tb at FP8 causal 8K, equal clock against FA3, twice more:
# the two sessions since masked tiles compare each score once read 1.103 and 1.097 (20261203T081049Z, 082424Z),
# on both sides of the goal's 1.10. (b) Why -pt is slower where no block is short: at non-causal 8K under Nsight
# Compute A0 took 633 us under -pt against 599 us without (20261203T082229Z, 082205Z) with the same instructions
# (189.0 M), the same stalls per instruction, a better L2 hit rate (80.0% against 78.1%) and only 2% more warp
# samples: the extra time is SMs without warps. A persistent grid fixes each SM's share in advance and ends with
# its slowest SM, where one program per block lets the faster SMs take more. The audit now reads the busiest SM's
# active cycles against the mean (sm__cycles_active.max / .avg): expected near 1 without -pt, several percent above
# it under -pt.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/balance.sh 1`
set -uo pipefail
STEP=${1:?step 1}
PAYLOAD=
. tools/gpu/lease_step.sh
hg2=gluon-n128s2-c240l24-hg2-rla-lmt-tb
hg16=gluon-n128s2-c240l24-hg16-rla-lmt-tb
pt=gluon-n128s2-c240l24-hg16-pt-rla-lmt-tb
case "$STEP" in
1) for run in 1 2; do
     sb latency "${against_fa3[@]}" "${fp8_folded[@]}" --seq 8192 --triton-config $hg2
   done
   audit=(python3 -m softbench audit --backend triton --dtype fp8 --seq 8192 --out "$DIR")
   for cfg in $hg16 $pt; do
     timeout 90 "${audit[@]}" --no-causal --variants A0,h15-folded --triton-config $cfg 2>&1 | grep -v "━" \
       | grep -A16 "Nsight Compute, one launch"
   done ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "step$STEP"
