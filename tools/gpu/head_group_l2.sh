#!/usr/bin/env bash
# Issue 15, prepared 2026-12-04 12:02 after tensor_busy.sh (lease 11:58-12:01); sealed first: sealed/head-group-l2.yaml.
# tensor_busy.sh found why hg4 beats hg8 at BF16 causal 8K: under hg8 A0 reads 161 MB from DRAM (L2 hits 83%)
# against hg4's 102 MB (93%), Q, K and V being 96 MB, and takes 1.0% more SM cycles (20261204T115933Z against
# 115826Z). The keys and values of a group's heads are 16 MB under hg4 at BF16 8K and under hg8 at FP8 8K (both
# defaults), 32 MB under hg8 at BF16 8K: the L2 (two partitions of 25 MB) holds the one, not the other. At BF16 causal
# 16K, the one shape where A0 is still short of FA3 (-0.24% over seven sessions), hg4's heads hold 32 MB and A0 reads
# 326 MB against FA3's 229 (Q, K, V: 192 MB; 115955Z). The rule "a group's keys and values within 16 MB" gives hg2
# at BF16 16K and hg4 at FP8 16K, where the defaults take hg4 and hg8.
# Step 1: audits (DRAM reads, L2 hits, SM cycles): A0 at BF16 causal 16K under hg2 and again under the default's hg4;
#         A0 and h15-folded at FP8 causal 16K under the FP8 default (hg8, FA3 beside them) and under hg4.
# Step 2: BF16 causal 16K, 30 s, two processes per kernel, against FA3: hg2, hg4, hg2, hg4 (decided before step 1).
# Step 3: FP8 causal 16K, 12 s, against FA3: hg8 (the default) and hg4.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/head_group_l2.sh 1`
#          (carry .gpu/b), and while the host is still held `. /tmp/gpu-site/env.sh && bash tools/gpu/head_group_l2.sh N`
#          for N = 2, 3
set -uo pipefail
STEP=${1:?step 1, 2 or 3}
PAYLOAD=
LEASE=head-group-l2  # apart from other scripts' steps in the same lease (lease_step.sh)
. tools/gpu/lease_step.sh
bf16() { echo "gluon-n128s2-c240l24-hg$1-pd-rl-ro-ltt-pm-tb-mlf"; }
fp8() { echo "gluon-n128s2-c240l24-hg$1-g1-pd-rla-lmt-tb-mlf"; }
audit=(python3 -m softbench audit --backend triton --causal --out "$DIR")
run() { local t0=$SECONDS; timeout 200 "${audit[@]}" "$@" 2>&1 | grep -v "━" | grep -E "DRAM|L2 hit|tensor|duration|SM MHz|session:"; echo "wall $((SECONDS - t0)) s: audit $*"; }
bf16_folded=(--dtype bf16 --variant h15-folded)
case "$STEP" in
1) run --dtype bf16 --seq 16384 --variants A0 --triton-config "$(bf16 2)"
   run --dtype bf16 --seq 16384 --variants A0 --triton-config "$(bf16 4)"
   run --dtype fp8 --seq 16384 --variants A0,h15-folded --reference fa3 --triton-config "$(fp8 8)"
   run --dtype fp8 --seq 16384 --variants A0,h15-folded --triton-config "$(fp8 4)" ;;
2) for hg in 2 4 2 4; do
     sb latency "${against_fa3[@]}" "${bf16_folded[@]}" --seq 16384 --processes 2 --triton-config "$(bf16 $hg)"
   done ;;
3) for hg in 8 4; do
     sb latency "${against_fa3[@]}" "${fp8_folded[@]}" --seq 16384 --budget-s 12 --triton-config "$(fp8 $hg)"
   done ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
