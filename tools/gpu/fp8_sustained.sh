#!/usr/bin/env bash
# Issue 15, prepared 2026-12-04 22:00 without a device; sealed first: sealed/fp8-sustained-default.yaml. The goal
# "the best correct Rowmax-H15 form at least 1.05 of FA3 sustained at the power cap" (FP8 causal 8K) rests, in the FP8
# default (gluon-n128s2-c240l24-hg8-g1-pd-rla-lmt-tb-mlf, where h15-folded's gates pass), on one session:
# 20261204T070937Z, +8.00% [+7.49, +8.52] per block pair (tools/analysis/goal_status.py). Step 1: two more sustained
# sessions, h15-folded against A0 with the A/A null and FA3, each kernel in its own blocks of 4 s. Ran 2026-12-05
# 02:14-02:18 (20261205T021416Z, 021620Z; the seal met).
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/fp8_sustained.sh 1`
#          (carry .gpu/b)
set -uo pipefail
STEP=${1:?step 1}
PAYLOAD=
LEASE=fp8-sustained  # apart from other scripts' steps in the same lease (lease_step.sh)
. tools/gpu/lease_step.sh
case "$STEP" in
1) for _ in 1 2; do
     sbt latency "${sustained_fa3[@]}" "${fp8_folded[@]}" --seq 8192
   done ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
