#!/usr/bin/env bash
# Issue 15, prepared 2026-12-05 12:37; sealed first: sealed/fp8-k-ring.yaml. The FP8 audit on an H100
# (20261205T122700Z), its waits read at the QGMMA, puts the consumers' waits for K at the key loop at 1,341 samples
# in noexp, 745 in h15-folded and 316 in A0: the shorter the loop, the longer it waits for K. -ka alone was level at
# FP8 for A0 and h15-folded (2026-12-04 17:16-17:27); with K's ring three long it was never timed at FP8. Whether
# the two together give h15-folded some of its 2.6% back.
# Step 1: FP8 causal 8K, h15-folded against FA3 with the A/A null, 12 s at equal clock: K's ring three long and
#         V's two under -ka, then -ka with two-deep rings, then the FP8 default, then the first again. The latency
#         run's own smoke check compares each kernel's output with the reference before it is timed.
#         Ran 2026-12-05 19:38-19:41 on an H200 (20261205T193812Z-194006Z): h15-folded +11.00/+11.95% against FA3
#         per pair under s3-ka-v2, -ka alone +12.07%, the default +11.65%; 1 of 2 met. K earlier gave nothing here too.
# Step 2 (prepared 2026-12-05 16:00; sealed first: sealed/h100-k-ring.yaml): the same question on an H100 SXM, where
#         h15-folded gains less over A0 than on the H200 (docs/hopper-notes.md, "The H100 replication"): h15-folded
#         under K's ring of three and -ka, the FP8 default as the control in the same lease, noexp under both.
#         Ran 2026-12-05 16:07-16:11 on an H100 (20261205T160727Z-161016Z): 3 of 3 met, h15-folded +10.3/+10.8%
#         against FA3 under s3-ka-v2 beside the default's +11.1% (median ratios): K earlier gave the form nothing.
# Each step refuses any board but its own, so that nothing lands beside the other board's sessions by mistake.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/fp8_k_ring.sh 1`
#          (carry .gpu/b)
set -uo pipefail
STEP=${1:?step 1 or 2}
PAYLOAD=
LEASE=fp8-k-ring  # apart from other scripts' steps in the same lease (lease_step.sh)
board=$(nvidia-smi --query-gpu=name --format=csv,noheader)
case "$STEP" in
1) [[ $board == *H200* ]] || { echo "step 1 is the H200's and this is $board: nothing run"; exit 3; } ;;
2) [[ $board == *H100* ]] || { echo "step 2 is the H100's and this is $board: nothing run"; exit 3; } ;;
esac
. tools/gpu/lease_step.sh
default=gluon-n128s2-c240l24-hg8-g1-pd-rla-lmt-tb-mlf
k_ring=gluon-n128s3-c240l24-hg8-g1-pd-rla-lmt-tb-mlf-ka-v2
k_ahead=$default-ka
case "$STEP" in
1) for cfg in $k_ring $k_ahead $default $k_ring; do
     sbt latency "${against_fa3[@]}" "${fp8_folded[@]}" --seq 8192 --budget-s 12 --triton-config "$cfg"
   done ;;
2) for run in "$k_ring h15-folded" "$default h15-folded" "$k_ring noexp" "$default noexp" "$k_ring h15-folded"; do
     set -- $run
     sbt latency "${against_fa3[@]}" --dtype fp8 --variant "$2" --seq 8192 --budget-s 12 --triton-config "$1"
   done ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
