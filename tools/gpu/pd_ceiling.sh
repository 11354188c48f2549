#!/usr/bin/env bash
# Issue 15, prepared 2026-12-04 09:05 after hg_seq.sh and fp8_two.sh (lease 08:44-08:58); sealed first:
# sealed/pd-ceiling.yaml.
# Step 1: (a) the BF16 ceiling under the 16-bit default as it is now (-pd, hg4): noexp, which computes no weight at
# all, at causal 8K and 16K for 12 s. The last ceiling (0.989 of FA3, 20261204T040446Z) predates -pd, which moved A0
# by 2-3 points; issue 15 asks BF16 Rowmax-H15 for 1.03 of FA3, and no Rowmax-H15 form can beat noexp.
# (b) two consumers hg2 under -pd (h15-folded 1.138 of A0 and 1.150 of FA3 at equal clock, 085610Z) sustained at the
# power cap, beside the FP8 default's 1.079 (070937Z). (c) BF16 causal 16K under hg1 for 30 s (0.999 in 12 s,
# 084533Z; hg4 0.991-0.996 in 30 s).
# Step 2: two consumers hg2 at FP8 non-causal 8K and causal 16K, 12 s screens of h15-folded.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/pd_ceiling.sh 1` (carry .gpu/b)
set -uo pipefail
STEP=${1:?step 1 or 2}
PAYLOAD=
LEASE=pd-ceiling  # apart from other scripts' steps in the same lease (lease_step.sh)
. tools/gpu/lease_step.sh
two_hg2=gluon-n128s2-c240l24-hg2-pd-rla-lmt-tb-mlf
case "$STEP" in
1) for seq in 8192 16384; do
     sb latency "${against_fa3[@]}" --dtype bf16 --variant noexp --seq $seq --budget-s 12
   done
   sb latency --backend triton --null --reference fa3 "${fp8_folded[@]}" --seq 8192 --protocol sustained \
     --triton-config $two_hg2
   sb latency "${against_fa3[@]}" "${bf16_sat[@]}" --seq 16384 --triton-config gluon-n128s2-c240l24-hg1-pd-rl-ro-ltt-pm-tb-mlf ;;
2) sb latency "${against_fa3[@]}" "${fp8_folded[@]}" --seq 8192 --no-causal --budget-s 12 --triton-config $two_hg2
   sb latency "${against_fa3[@]}" "${fp8_folded[@]}" --seq 16384 --budget-s 12 --triton-config $two_hg2 ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
