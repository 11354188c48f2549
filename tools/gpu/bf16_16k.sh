#!/usr/bin/env bash
# Issue 15, prepared 2026-12-04 09:40 without device time left; sealed first: sealed/bf16-16k.yaml. BF16 causal 16K
# is the one shape where A0 is still short of FA3 under the 16-bit default (0.987-0.999 in 12 and 30 s runs on
# 2026-12-04, nulls up to half a point), while causal 8K reads 1.004-1.008. No head group moves 16K (hg_seq.sh).
# Where does the point go? 16K runs the same key loop as 8K with twice the keys per query block, so a loop-bound
# gap would show at 8K too; a block's tail (O's epilogue, the next block's Q) weighs half as much at 16K.
# Step 1: `softbench audit --source-stalls` of A0 under the default at causal 8K and 16K, FA3 beside each: where the
# warps wait, per instruction class, in both kernels at both lengths.
# Step 2: causal 16K for 30 s with every kernel in two processes (--processes 2), so that the ratio to FA3 carries
# the offset between processes that a one-process run cannot see.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/bf16_16k.sh 1` (carry .gpu/b)
set -uo pipefail
STEP=${1:?step 1 or 2}
PAYLOAD=
LEASE=bf16-16k  # apart from other scripts' steps in the same lease (lease_step.sh)
. tools/gpu/lease_step.sh
audit=(python3 -m softbench audit --backend triton --dtype bf16 --causal --reference fa3 --source-stalls --out "$DIR")
case "$STEP" in
1) for seq in 8192 16384; do
     timeout 240 "${audit[@]}" --seq $seq --variants A0 2>&1 | grep -v "━" | tail -14
   done ;;
2) sb latency "${against_fa3[@]}" "${bf16_sat[@]}" --seq 16384 --processes 2 ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
