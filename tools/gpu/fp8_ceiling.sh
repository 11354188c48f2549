#!/usr/bin/env bash
# Issue 15, prepared 2026-12-05 02:30; sealed first: sealed/fp8-8k-ceiling.yaml. tools/analysis/goal_status.py sets
# each Rowmax-H15 form goal beside the exponential-free control (noexp) timed against FA3 in the same grouping; at
# FP8 causal 8K that ceiling was timed only under the configuration of 2026-12-02 (+14.11%, 20261202T174104Z), never
# under today's FP8 default (gluon-n128s2-c240l24-hg8-g1-pd-rla-lmt-tb-mlf), so the table reads "not known" there.
# Step 1: two sessions of 12 s, noexp against A0 with the A/A null and FA3, at equal clock. Ran 2026-12-05
# 02:59-03:01 (20261205T025946Z, 030032Z): noexp +20.7% and +19.7% against FA3, above the seal's range (0 of 2 met).
# Step 2 (prepared 2026-12-05 04:00; sealed first: sealed/fp8-sustained-ceiling.yaml): the same ceiling sustained at
# the power cap, each kernel in its own blocks, beside the sustained goal (1.05 of FA3; h15-folded +7.61% there).
# Ran 2026-12-05 19:33-19:37 on an H200 (20261205T193302Z, 193501Z): noexp +10.56% against FA3 sustained over the
# two, +8.8% and +8.2% over A0; 1 of 2 met (N1's range against FA3 was too high: at the cap FA3 nears A0).
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/fp8_ceiling.sh 1` (or 2)
#          (carry .gpu/b)
set -uo pipefail
STEP=${1:?step 1 or 2}
PAYLOAD=
LEASE=fp8-ceiling  # apart from other scripts' steps in the same lease (lease_step.sh)
# its seals scope the sessions by compute capability (9.0), which an H100 shares: refuse it here instead
board=$(nvidia-smi --query-gpu=name --format=csv,noheader)
[[ $board == *H200* ]] || { echo "the ceiling's seals are the H200's and this is $board: nothing run"; exit 3; }
. tools/gpu/lease_step.sh
case "$STEP" in
1) for _ in 1 2; do
     sbt latency "${against_fa3[@]}" --dtype fp8 --variant noexp --seq 8192 --budget-s 12
   done ;;
2) for _ in 1 2; do
     sbt latency "${sustained_fa3[@]}" --dtype fp8 --variant noexp --seq 8192
   done ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
