#!/usr/bin/env bash
# Issue 15, prepared 2026-12-05 04:00; no seal (a diagnosis, as deferred_stalls.sh). Under the FP8 default
# (gluon-n128s2-c240l24-hg8-g1-pd-rla-lmt-tb-mlf) noexp reads about 7 points above h15-folded at FP8 causal 8K
# (20261205T025946Z, 030032Z), and the static sm_90a cross-compile (20261205T030624Z) puts h15-folded's key loop at
# noexp's plus 64 SHF and 11 more per tile and thread. Whether that shift is what the 7 points are, under the
# hardware's counters: issue slots, pipes, the tensor core's busy share and where the warps wait, FA3 beside them.
# Step 1: `softbench audit --source-stalls` of A0, noexp and h15-folded at FP8 causal 8K under the FP8 default,
# with FA3's counters. Ran 2026-12-05 12:27-12:28 on an H100 (no H200 could be started): 20261205T122700Z; on an
# H200 19:37 (20261205T193702Z): beside the H100's, the consumers' wait for K is what grows on the H100.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/fp8_stalls.sh 1`
#          (carry .gpu/b)
set -uo pipefail
STEP=${1:?step 1}
PAYLOAD=
LEASE=fp8-stalls  # apart from other scripts' steps in the same lease (lease_step.sh)
. tools/gpu/lease_step.sh
case "$STEP" in
1) timeout 420 python3 -m softbench audit --backend triton --dtype fp8 --causal --seq 8192 \
     --variants A0,noexp,h15-folded --reference fa3 --source-stalls --out "$DIR" 2>&1 \
     | grep -v "━" | tail -40 ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
