#!/usr/bin/env bash
# Issue 2's GPU matrix on sm_90: BF16 4K/8K/16K causal and non-causal (A0 vs A1, 3 rounds), plus the A/A null
# and the noexp ceiling at 8K causal. Run from the project root on the GPU host after `. /tmp/gpu-site/env.sh`.
# Sessions go to ${1:-sessions}; pack them into $OUT yourself (the transfer keeps few files).
set -uo pipefail
OUTDIR=${1:-sessions}
sb() { python3 -m softbench "$@" 2>&1 | grep -v '━'; }
sb env --record --out "$OUTDIR" > /dev/null
sb latency --backend fa4 --dtype bf16 --seq 4K --seq 8K --seq 16K --causal --out "$OUTDIR"
sb latency --backend fa4 --dtype bf16 --seq 4K --seq 8K --seq 16K --no-causal --out "$OUTDIR"
sb latency --backend fa4 --dtype bf16 --seq 8K --causal --baseline A0 --variant A0 --out "$OUTDIR"
sb latency --backend fa4 --dtype bf16 --seq 8K --causal --baseline A0 --variant noexp --out "$OUTDIR"
# what a Hopper machine cannot do must be said clearly, with a non-zero exit
sb latency --backend fa4 --dtype fp8 --seq 16K --rounds 3 --out "$OUTDIR"; echo "fp8 on sm_90 exit code: ${PIPESTATUS[0]}"
