#!/usr/bin/env bash
# Issue 15, prepared 2026-12-02 16:00 without a GPU (the session's device time was spent): what the -rl defaults
# change elsewhere. Under the full rescale, -ltt gave BF16 nothing and then paid 1.8 points once -rl had taken O's
# multiplies out of most tiles; the tensor core's row sums (-lm) cost BF16 3 points then. One consumer warpgroup
# per program is out at BF16 (0.670, 20261202T090750Z). Both cross-compiled for sm_90a with no spill and no
# serialized wgmma (BF16 A0 loops: -rl-ltt-tb 978, -rl-lmt-tb 930; FP8 two consumers -rl-lmt-tb A0 915,
# h15-folded 857). n128s3 with -g1 at FP8 takes 124 KB of shared memory, so one program per SM: left out.
# Step 1: BF16 -rl-lmt-tb checked against the simulation and its plain form (A0, h15-sat), and against exact FP32
# at 8K and 16K beside the default and FA3 (the FP8 wgmma's accumulation lost bits over a row; BF16's is not known
# here); FP8 two consumers -rl-lmt-tb checked (A0, h15-folded). Then 12 s
# interleavings against FA3 at causal 8K: BF16 the default and -rl-lmt-tb; FP8 the default and -rl-lmt-tb.
# Step 2: `softbench audit --source-stalls` under the defaults: BF16 causal 8K A0, FP8 causal 8K A0 and h15-folded,
# FA3 beside each (planned as tools/gpu/lazy_followup.sh's step 2, which the lease had no time for).
# Step 3 (added 2026-12-02 17:20, sealed in sealed/noexp-ceiling.yaml): the exponential-free control (noexp)
# under the defaults against FA3 at causal 8K, FP8 and BF16: the ceiling any Rowmax-H15 form can reach in this
# kernel, beside the goals of 1.10 (FP8) and 1.03 (BF16).
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/after_rl_screens.sh 1`
#          (carry .gpu/b), then `. /tmp/gpu-site/env.sh && bash tools/gpu/after_rl_screens.sh 2` while it is held
# Predicted and sealed first (sealed/gluon-after-rl-screens.yaml): score with
# `softbench evaluate sealed/gluon-after-rl-screens.yaml --sessions sessions`.
set -uo pipefail
STEP=${1:?step 1..3}
PAYLOAD=
. tools/gpu/lease_step.sh
bf16_lmt=gluon-n128s2-c240l24-hg8-rl-lmt-tb
fp8_two=gluon-n128s2-c240l24-hg8-rl-lmt-tb
short=("${against_fa3[@]}" --seq 8192 --budget-s 12)
audit=(python3 -m softbench audit --backend triton --seq 8192 --causal --reference fa3 --source-stalls --out "$DIR")
case "$STEP" in
1) timeout 100 python3 tools/gpu/gluon_probe.py "$DIR/probe-screens-bf16" --only=bf16 --checks-only \
     --check-shapes=0,2 --check-configs=$bf16_lmt --check-variants=A0,h15-sat && touch /tmp/sb/bf16-ok
   timeout 120 python3 tools/gpu/gluon_probe.py "$DIR/probe-long-bf16" --only=bf16 --checks-only --check-shapes=99 \
     --check-configs=$bf16_lmt --check-variants=A0 --long-checks
   timeout 80 python3 tools/gpu/gluon_probe.py "$DIR/probe-screens-fp8" --only=fp8 --checks-only \
     --check-shapes=0,2 --check-configs=$fp8_two --check-variants=A0,h15-folded && touch /tmp/sb/fp8-ok
   sb latency "${short[@]}" "${bf16_sat[@]}"
   if [ -f /tmp/sb/bf16-ok ]; then
     sb latency "${short[@]}" "${bf16_sat[@]}" --triton-config $bf16_lmt
   fi
   sb latency "${short[@]}" "${fp8_folded[@]}"
   [ -f /tmp/sb/fp8-ok ] && sb latency "${short[@]}" "${fp8_folded[@]}" --triton-config $fp8_two ;;
2) timeout 200 "${audit[@]}" --dtype bf16 --variants A0 2>&1 | grep -v "━" | tail -12
   timeout 240 "${audit[@]}" --dtype fp8 --variants A0,h15-folded 2>&1 | grep -v "━" | tail -12 ;;
3) sb latency "${short[@]}" --dtype fp8 --variant noexp
   sb latency "${short[@]}" --dtype bf16 --variant noexp ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "step$STEP"
