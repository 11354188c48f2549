#!/usr/bin/env bash
# Issue 15, after -lt (per-thread row sums) took FP8 A0 from 0.919 to 0.944-0.947 of FA3 at causal 8K and cost BF16
# a point (docs/hopper-notes.md, "Per-thread row sums"). Written 2026-12-02 09:55 when the session's device time was
# spent: ready, not run.
# Step 1: softbench's per-instruction stall samples of the new FP8 default (A0, h15-folded, FA3) and of BF16 A0 with
# and without -lt, to see where the samples moved (the old FP8 default's are in 20261202T092647Z, BF16's plain in
# 090852Z). Step 2: screens against FA3 at causal 8K: FP8 -g1-lt-tb with 16 heads at a time (-hg16, 0.920 against
# 0.915 before -lt), and at BF16 -lt under the named-barrier ping-pong (-ppn-lt-tb), which asks whether -lt lost
# at BF16 because the two consumers, no longer held at each tile's end by the quad's shuffles, collide more. Also
# -ro at FP8 (O's rescale issued beside the next Q.K^T instead of at the tile's end: FA3's RescaleOBeforeGemm),
# first checked bit for bit against the plain kernel (the same multiplies), then timed.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh && . /tmp/gpu-site/env.sh && bash tools/gpu/lt_followup.sh 1` (carry .gpu/b), then
#          `. /tmp/gpu-site/env.sh && bash tools/gpu/lt_followup.sh 2` while the host is still held
# Step 2 was predicted and sealed first (sealed/gluon-lt-followup.yaml): score it with
# `softbench evaluate sealed/gluon-lt-followup.yaml --sessions sessions`.
set -uo pipefail
STEP=${1:?step 1..2}
PAYLOAD=
. tools/gpu/lease_step.sh
audit=(python3 -m softbench audit --backend triton --seq 8192 --causal --reference fa3 --source-stalls --out "$DIR")
common=(--backend triton --null --reference fa3 --start-order shuffled --seq 8192)
case "$STEP" in
1) timeout 240 "${audit[@]}" --dtype fp8 --variants A0,h15-folded 2>&1 | grep -v "━" | tail -12
   timeout 200 "${audit[@]}" --dtype bf16 --variants A0 --triton-config gluon-n128s2-c240l24-hg8-lt-tb 2>&1 \
     | grep -v "━" | tail -12 ;;
2) timeout 150 python3 tools/gpu/gluon_probe.py "$DIR/probe-ro-fp8" --only=fp8 --checks-only \
     --check-configs=gluon-n128s2-c240l24-hg8-g1-ro-lt-tb --check-variants=A0,h15-folded --repeat-equal=3 \
     && sb latency "${common[@]}" --dtype fp8 --variant h15-folded --triton-config gluon-n128s2-c240l24-hg8-g1-ro-lt-tb
   sb latency "${common[@]}" --dtype fp8 --variant h15-folded --triton-config gluon-n128s2-c240l24-hg16-g1-lt-tb
   sb latency "${common[@]}" --dtype fp8 --variant h15-folded
   sb latency "${common[@]}" --dtype bf16 --variant h15-sat --triton-config gluon-n128s2-c240l24-hg8-ppn-lt-tb
   sb latency "${common[@]}" --dtype bf16 --variant h15-sat ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "step$STEP"
