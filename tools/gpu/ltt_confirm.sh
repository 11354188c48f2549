#!/usr/bin/env bash
# Issue 15, after tools/gpu/lt_followup.sh (lease of 2026-12-02 11:26-11:44): -ltt (pairwise per-thread row sums)
# gave FP8 A0 / FA3 0.952 at causal 8K against the default's 0.942 in the same lease, one run each; -ro lost three
# points (0.919, 0.904 with -ltt). This repeats -ltt beside the default at FP8 causal 8K and times both at FP8
# non-causal 8K and causal 16K, and repeats the BF16 default, whose run in that lease had an A/A null of +1.42%.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh && . /tmp/gpu-site/env.sh && bash tools/gpu/ltt_confirm.sh 1` (carry .gpu/b)
set -uo pipefail
STEP=${1:?step 1}
PAYLOAD=
. tools/gpu/lease_step.sh
common=(--backend triton --null --reference fa3 --start-order shuffled --variant h15-folded --dtype fp8)
ltt=gluon-n128s2-c240l24-hg8-g1-ltt-tb
case "$STEP" in
1) for seq in "--seq 8192" "--seq 8192 --no-causal" "--seq 16384"; do
     sb latency "${common[@]}" $seq --triton-config $ltt
     sb latency "${common[@]}" $seq
   done
   sb latency --backend triton --null --reference fa3 --start-order shuffled --seq 8192 --dtype bf16 --variant h15-sat ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "step$STEP"
