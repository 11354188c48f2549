#!/usr/bin/env bash
# Issue 15, prepared 2026-12-04 11:55 (sealed first: sealed/tensor-busy.yaml). Two goals are open: A0 a quarter
# point short of FA3 at BF16 causal 16K, and no correct Rowmax-H15 form at 1.03 of FA3 at BF16 causal 8K. Both turn
# on how much of the time the tensor core works, which no audit has read so far: the audit now asks Nsight Compute
# for the wgmma pipe's share of the SMs' active cycles (tensor_active_pct) and the working time it implies
# (tensor_busy_us), which two kernels computing the same tiles should share.
# Step 1: BF16 causal 8K under the 16-bit default, A0, noexp and h15-folded with FA3 beside them (how far each
#         stands from a tensor core without gaps, and what the exponential leaves idle); A0 under the same default
#         with hg8 in place of hg4 (its L2 hit rate and DRAM reads: the open question why hg4 is faster).
# Step 2: BF16 causal 16K, A0 and FA3; FP8 causal 8K under the FP8 default, A0, noexp and h15-folded with FA3.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/tensor_busy.sh 1` (carry
#          .gpu/b), and while the host is still held `. /tmp/gpu-site/env.sh && bash tools/gpu/tensor_busy.sh 2`
set -uo pipefail
STEP=${1:?step 1 or 2}
PAYLOAD=
LEASE=tensor-busy  # apart from other scripts' steps in the same lease (lease_step.sh)
. tools/gpu/lease_step.sh
audit=(python3 -m softbench audit --backend triton --causal --out "$DIR")
run() { local t0=$SECONDS; timeout 280 "${audit[@]}" "$@" 2>&1 | grep -v "━" | tail -24; echo "wall $((SECONDS - t0)) s: audit $*"; }
case "$STEP" in
1) run --dtype bf16 --seq 8192 --variants A0,noexp,h15-folded --reference fa3
   run --dtype bf16 --seq 8192 --variants A0 --triton-config gluon-n128s2-c240l24-hg8-pd-rl-ro-ltt-pm-tb-mlf ;;
2) run --dtype bf16 --seq 16384 --variants A0 --reference fa3
   run --dtype fp8 --seq 8192 --variants A0,noexp,h15-folded --reference fa3 ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
