#!/usr/bin/env bash
# Issue 15, prepared 2026-12-03 16:50 without a GPU; sealed first: sealed/bf16-folded-rla.yaml.
# Step 1: the BF16 Rowmax-H15 form with the fewest instructions. h15-folded's loop holds 852 instructions under
# -rla (its anchor moved lazily, as A0's maximum under -rl) against A0's and h15-sat's 906 (sm_90a cross-compile),
# and it has not been timed at BF16 since 2026-12-01, nor ever under -rla. Its outputs are checked against the
# simulation with the same lazy anchor (threshold 8 at 16 bits), its gates run, then it is timed at causal 8K
# against FA3 under the 16-bit default with -rla (hg8) and under hg2.
# Step 2: the FP8 claim repeated with every kernel in two processes (--processes 2, whose interval holds the offset
# between processes), at equal clock and sustained at the cap.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/bf16_folded.sh 1`
#          (carry .gpu/b); step 2 while warm: `. /tmp/gpu-site/env.sh && bash tools/gpu/bf16_folded.sh 2`
set -uo pipefail
STEP=${1:?step 1 or 2}
PAYLOAD=
. tools/gpu/lease_step.sh
bf16_hg8=gluon-n128s2-c240l24-hg8-rla-ltt-tb
bf16_hg2=gluon-n128s2-c240l24-hg2-rla-ltt-tb
fp8_hg2=gluon-n128s2-c240l24-hg2-rla-lmt-tb
bf16_folded=(--dtype bf16 --variant h15-folded)
case "$STEP" in
1) timeout 150 python3 tools/gpu/gluon_probe.py "$DIR/probe-folded-bf16" --only=bf16 --checks-only \
     --check-shapes=0,2,4 --check-configs=$bf16_hg8,$bf16_hg2 --check-variants=A0,h15-folded
   sb gates --backend triton --dtype bf16 --causal --variant h15-folded --triton-config $bf16_hg8
   for cfg in $bf16_hg8 $bf16_hg2; do
     sb latency "${against_fa3[@]}" "${bf16_folded[@]}" --seq 8192 --triton-config $cfg
   done ;;
2) sb latency "${against_fa3[@]}" "${fp8_folded[@]}" --seq 8192 --triton-config $fp8_hg2 --processes 2
   sb latency --backend triton --null --reference fa3 "${fp8_folded[@]}" --seq 8192 --protocol sustained \
     --triton-config $fp8_hg2 ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "step$STEP"
