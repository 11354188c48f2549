#!/usr/bin/env bash
# Issue 15: per-thread partial row sums (-lt, GluonConfig.row_sum "thread"), as FA3's softmax keeps them: each
# thread's own part of its rows' sums carried across the key loop, the quad's four parts added once at the end,
# instead of a full row sum (two shuffles and two adds per row) every tile. Another summation order, so checked
# against softbench's tile-wise simulation (not bit for bit against the plain kernel), then timed against FA3 at
# causal 8K beside the defaults in the same lease (step 1; predicted and sealed first: sealed/gluon-row-sums.yaml,
# score with `softbench evaluate sealed/gluon-row-sums.yaml --sessions sessions`). Step 2: softbench's own
# per-instruction stall samples at FP8 (`softbench audit --source-stalls`, A0, h15-folded and FA3), which
# tools/gpu/stalls.sh 2 took by hand.
# Ran 2026-12-02 09:19-09:35 (steps 1 and 2; sessions 20261202T092243Z-092647Z, probes
# gluon-probe-h200-20261202-0920-row-sums-*), followed in the same lease by `sb latency` calls typed on the command
# line: FP8 -g1-lt-tb non-causal 8K, causal 16K and sustained, two consumers with -lt, and a BF16 repeat
# (092746Z-093437Z).
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh && . /tmp/gpu-site/env.sh && bash tools/gpu/row_sums.sh 1` (carry .gpu/b), then
#          `. /tmp/gpu-site/env.sh && bash tools/gpu/row_sums.sh 2` while the host is still held
set -uo pipefail
STEP=${1:?step 1..2}
PAYLOAD=
. tools/gpu/lease_step.sh
common=(--backend triton --null --reference fa3 --start-order shuffled --seq 8192)
case "$STEP" in
1) timeout 150 python3 tools/gpu/gluon_probe.py "$DIR/probe-row-sums-fp8" --only=fp8 --checks-only \
     --check-configs=gluon-n128s2-c240l24-hg8-g1-lt-tb --check-variants=A0,h15-folded \
     && timeout 150 python3 tools/gpu/gluon_probe.py "$DIR/probe-row-sums-bf16" --only=bf16 --checks-only \
     --check-configs=gluon-n128s2-c240l24-hg8-lt-tb --check-variants=A0,h15-sat \
     && touch /tmp/sb/row-sums-ok
   if [ -f /tmp/sb/row-sums-ok ]; then
     sb latency "${common[@]}" --dtype fp8 --variant h15-folded --triton-config gluon-n128s2-c240l24-hg8-g1-lt-tb
     sb latency "${common[@]}" --dtype fp8 --variant h15-folded
     sb latency "${common[@]}" --dtype bf16 --variant h15-sat --triton-config gluon-n128s2-c240l24-hg8-lt-tb
     sb latency "${common[@]}" --dtype bf16 --variant h15-sat
   else echo "row-sum probe failed: no timing follows"; fi ;;
2) timeout 300 python3 -m softbench audit --backend triton --dtype fp8 --seq 8192 --causal --variants A0,h15-folded \
     --reference fa3 --source-stalls --out "$DIR" 2>&1 | grep -v "━" | tail -40 ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "step$STEP"
