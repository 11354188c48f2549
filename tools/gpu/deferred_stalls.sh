#!/usr/bin/env bash
# Issue 15, prepared 2026-12-04 13:08 after deferred_epilogue.sh (lease 12:40-12:47), with the session's last device
# time; no seal (a diagnosis, as bf16_folded_stalls.sh). -pde read A0 at 0.979 of FA3 at BF16 causal 8K against -pd's
# 1.004 across sessions. The reading to test: deferred, the epilogue no longer overlaps the producer's load of the
# next Q, so the consumer waits for that Q. Where the warps wait, instruction by instruction, and how busy the tensor
# core is, under each.
# Step 1: `softbench audit --source-stalls` of A0 at BF16 causal 8K under the 16-bit default with -pd and with -pde.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/deferred_stalls.sh 1`
#          (carry .gpu/b)
set -uo pipefail
STEP=${1:?step 1}
PAYLOAD=
LEASE=deferred-stalls  # apart from other scripts' steps in the same lease (lease_step.sh)
. tools/gpu/lease_step.sh
case "$STEP" in
1) for s in pd pde; do
     timeout 120 python3 -m softbench audit --backend triton --dtype bf16 --causal --seq 8192 --variants A0 \
       --source-stalls --triton-config "gluon-n128s2-c240l24-hg4-$s-rl-ro-ltt-pm-tb-mlf" --out "$DIR" 2>&1 \
       | grep -v "━" | grep -E "tensor|duration|SM MHz|wait|barrier|long score|session:|opcode|samples" | head -20
   done ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
