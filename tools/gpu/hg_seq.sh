#!/usr/bin/env bash
# Issue 15, prepared 2026-12-04 07:48 without device time left (the session's was spent); sealed first:
# sealed/hg-seq.yaml. BF16 causal 16K is the one shape where A0 is still short of FA3 (0.993-0.995 under the hg4
# default since 07:44, 0.989-0.993 under hg8). Under -pd hg4 gained a point over hg8 at causal 8K (1.005-1.008
# against 0.992-0.993) and less at 16K. Does a smaller head group help at 16K, where each head's keys and values
# are twice as large (8 MB in BF16, hd128)? Does the same rule hold at 8K?
# Step 1: 12 s screens at BF16 causal 16K under hg1, hg2 and hg4, then at causal 8K under hg1 and hg2 (hg4 at 8K:
# 071559Z, 072512Z, 072831Z). Step 2: 30 s at BF16 causal 16K under hg2 and hg4 back to back, whatever step 1 read
# (decided before it ran, so that step 1's screens pick nothing on their own).
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/hg_seq.sh 1` (carry .gpu/b)
set -uo pipefail
STEP=${1:?step 1 or 2}
PAYLOAD=
LEASE=hg-seq  # apart from other scripts' steps in the same lease (lease_step.sh)
. tools/gpu/lease_step.sh
label() { echo "gluon-n128s2-c240l24-hg$1-pd-rl-ro-ltt-pm-tb-mlf"; }
case "$STEP" in
1) for hg in 1 2 4; do
     sb latency "${against_fa3[@]}" "${bf16_sat[@]}" --seq 16384 --budget-s 12 --triton-config "$(label $hg)"
   done
   for hg in 1 2; do
     sb latency "${against_fa3[@]}" "${bf16_sat[@]}" --seq 8192 --budget-s 12 --triton-config "$(label $hg)"
   done ;;
2) for hg in 2 4; do
     sb latency "${against_fa3[@]}" "${bf16_sat[@]}" --seq 16384 --triton-config "$(label $hg)"
   done ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
