#!/usr/bin/env bash
# Issue 15, prepared 2026-12-04 10:35 after bf16_near_anchor.sh (lease 10:29-10:33). At BF16 h15-folded, whose loop
# is A0's with a shift per score in place of MUFU.EX2 (459 against 452 instructions), reads 2-3% slower than A0
# under the 16-bit default, with its anchor exact (20261204T101505Z) or moved past 2 octaves so that it jumps over
# O's rescale as A0 does (-rlan, 103133Z): the rescale is not where it loses. noexp, which computes no weight,
# reads 1.3% faster than A0 (090339Z).
# Step 1: `softbench audit --source-stalls` of A0, h15-folded and noexp at BF16 causal 8K under the default: where
# each kernel's warps wait, instruction by instruction, and the static per-element cost against noexp.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/bf16_folded_stalls.sh 1`
#          (carry .gpu/b)
set -uo pipefail
STEP=${1:?step 1}
PAYLOAD=
LEASE=bf16-folded-stalls  # apart from other scripts' steps in the same lease (lease_step.sh)
. tools/gpu/lease_step.sh
case "$STEP" in
1) timeout 400 python3 -m softbench audit --backend triton --dtype bf16 --causal --seq 8192 --source-stalls \
     --variants A0,h15-folded,noexp --out "$DIR" 2>&1 | grep -v "━" | tail -40 ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
