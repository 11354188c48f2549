#!/usr/bin/env bash
# Issue 15: does -tb change which program layout is fastest? The FP8 default (one consumer warpgroup per program,
# two programs per SM, -g1) was chosen on 2026-11-30, before -tb took the warpgroup barriers out; -tb gained 2.3
# points at BF16 (two consumers sharing each K/V tile) and 0.3 at FP8 (-g1). So: two consumers at FP8 (2 and 4
# stages) and one consumer at BF16, each under -tb, first checked bit for bit against its plain form, then timed
# against FA3 at causal 8K in an interleaved latency session with its A/A null (step 1). Step 2: the first GPU run of
# `softbench audit --source-stalls` (BF16 causal 8K, A0 and FA3: counters, warp stalls and the per-instruction
# samples that tools/gpu/stalls.sh 2 took by hand).
# Written 2026-12-02 08:15 when the session's device time was spent; ran 09:05-09:09 (steps 1 and 2, one lease;
# sessions 20261202T090554Z-090852Z and the probes gluon-probe-h200-20261202-0905-layouts-*). Step 1's outcome was
# predicted and sealed first (sealed/gluon-layouts-tb.yaml, 08:23): score it afterwards with
# `softbench evaluate sealed/gluon-layouts-tb.yaml --sessions sessions`.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh && . /tmp/gpu-site/env.sh && bash tools/gpu/layouts.sh 1` (carry .gpu/b), then
#          `. /tmp/gpu-site/env.sh && bash tools/gpu/layouts.sh 2` while the host is still held
set -uo pipefail
STEP=${1:?step 1..2}
PAYLOAD=
. tools/gpu/lease_step.sh
common=(--backend triton --null --reference fa3 --start-order shuffled)
case "$STEP" in
1) timeout 120 python3 tools/gpu/gluon_probe.py "$DIR/probe-layouts-fp8" --only=fp8 --checks-only --check-shapes=0 \
     --check-configs=gluon-n128s2-c240l24-hg8-tb,gluon-n128s4-c240l24-hg8-tb --check-variants=A0 \
     && timeout 60 python3 tools/gpu/gluon_probe.py "$DIR/probe-layouts-bf16" --only=bf16 --checks-only \
     --check-shapes=0 --check-configs=gluon-n128s2-c240l24-hg8-g1-tb --check-variants=A0 \
     && touch /tmp/sb/layouts-ok
   if [ -f /tmp/sb/layouts-ok ]; then
     for cfg in gluon-n128s2-c240l24-hg8-tb gluon-n128s4-c240l24-hg8-tb; do
       sb latency "${common[@]}" --dtype fp8 --seq 8192 --variant h15-folded --triton-config $cfg
     done
     sb latency "${common[@]}" --dtype bf16 --seq 8192 --variant h15-sat --triton-config gluon-n128s2-c240l24-hg8-g1-tb
   else echo "layout probe failed: no timing follows"; fi ;;
2) timeout 300 python3 -m softbench audit --backend triton --dtype bf16 --seq 8192 --causal --variants A0 \
     --reference fa3 --source-stalls --out "$DIR" 2>&1 | grep -v "━" ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "step$STEP"
