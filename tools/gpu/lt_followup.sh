#!/usr/bin/env bash
# Issue 15, after -lt (per-thread row sums) took FP8 A0 from 0.919 to 0.944-0.947 of FA3 at causal 8K and cost BF16
# a point (docs/hopper-notes.md, "Per-thread row sums"). Written 2026-12-02 09:59-10:09, when the session's device
# time was spent: ready, not run.
# Step 1: softbench's per-instruction stall samples of the new FP8 default (A0, h15-folded, FA3) and of BF16 A0 with
# -lt, to see where the samples moved (the old FP8 default's are in 20261202T092647Z, BF16's plain in 090852Z).
# Step 2, FP8 causal 8K against FA3 beside the default: -ro (O's rescale issued beside the next Q.K^T instead of at
# the tile's end, FA3's RescaleOBeforeGemm; the same multiplies, checked bit for bit first), -ltt (the per-thread
# sums added pairwise: a chain of 5 adds at the tile's end instead of 16; checked against the simulation) and both.
# Step 3: BF16 -ltt, and -lt under the named-barrier ping-pong (-ppn-lt-tb: did -lt lose at BF16 because the two
# consumers, no longer held at each tile's end by the quad's shuffles, collide more?), beside the BF16 default; FP8
# -g1-lt-tb with 16 heads at a time (-hg16: 0.920 against 0.915 before -lt).
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh && . /tmp/gpu-site/env.sh && bash tools/gpu/lt_followup.sh 1` (carry .gpu/b), then
#          `. /tmp/gpu-site/env.sh && bash tools/gpu/lt_followup.sh N` for N = 2, 3 while the host is still held
# Predicted and sealed first (sealed/gluon-lt-followup.yaml, sealed/gluon-row-sum-tree.yaml): score them with
# `softbench evaluate sealed/<name>.yaml --sessions sessions`.
set -uo pipefail
STEP=${1:?step 1..3}
PAYLOAD=
. tools/gpu/lease_step.sh
audit=(python3 -m softbench audit --backend triton --seq 8192 --causal --reference fa3 --source-stalls --out "$DIR")
common=(--backend triton --null --reference fa3 --start-order shuffled --seq 8192)
case "$STEP" in
1) timeout 240 "${audit[@]}" --dtype fp8 --variants A0,h15-folded 2>&1 | grep -v "━" | tail -12
   timeout 200 "${audit[@]}" --dtype bf16 --variants A0 --triton-config gluon-n128s2-c240l24-hg8-lt-tb 2>&1 \
     | grep -v "━" | tail -12 ;;
2) timeout 280 python3 tools/gpu/gluon_probe.py "$DIR/probe-ro-ltt-fp8" --only=fp8 --checks-only \
     --check-configs=gluon-n128s2-c240l24-hg8-g1-ro-lt-tb,gluon-n128s2-c240l24-hg8-g1-ltt-tb,gluon-n128s2-c240l24-hg8-g1-ro-ltt-tb \
     --check-variants=A0,h15-folded --repeat-equal=3 && touch /tmp/sb/ro-ltt-ok
   if [ -f /tmp/sb/ro-ltt-ok ]; then
     for cfg in gluon-n128s2-c240l24-hg8-g1-ro-lt-tb gluon-n128s2-c240l24-hg8-g1-ltt-tb gluon-n128s2-c240l24-hg8-g1-ro-ltt-tb; do
       sb latency "${common[@]}" --dtype fp8 --variant h15-folded --triton-config $cfg
     done
   else echo "-ro/-ltt probe failed: no timing of them follows"; fi
   sb latency "${common[@]}" --dtype fp8 --variant h15-folded ;;
3) timeout 120 python3 tools/gpu/gluon_probe.py "$DIR/probe-ltt-bf16" --only=bf16 --checks-only \
     --check-configs=gluon-n128s2-c240l24-hg8-ltt-tb --check-variants=A0,h15-sat \
     && sb latency "${common[@]}" --dtype bf16 --variant h15-sat --triton-config gluon-n128s2-c240l24-hg8-ltt-tb
   sb latency "${common[@]}" --dtype bf16 --variant h15-sat --triton-config gluon-n128s2-c240l24-hg8-ppn-lt-tb
   sb latency "${common[@]}" --dtype bf16 --variant h15-sat
   sb latency "${common[@]}" --dtype fp8 --variant h15-folded --triton-config gluon-n128s2-c240l24-hg16-g1-lt-tb ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "step$STEP"
