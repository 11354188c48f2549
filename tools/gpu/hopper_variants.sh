#!/usr/bin/env bash
# Issue 6 on the H200 (sm_90), BF16 b1 h16 d128: every FA4 variant against stock FA4 under the 3-round latency
# protocol, in one sweep per shape, with the A0-vs-A0 null (a second stock process) and the noexp ceiling, then
# the SASS + Nsight Compute audit of every variant at causal 8K. Two parts, each under the 10-minute call limit:
#   part 1: sweep causal 8K and 16K              (~5 min: 7 variants x 2 lengths, one process per variant)
#   part 2: sweep non-causal 8K, audit causal 8K (~6 min)
# Run from the project root on the GPU host after `. /tmp/gpu-site/env.sh`; sessions go to ${2:-sessions}.
set -uo pipefail
PART=${1:?part 1 or 2}
OUTDIR=${2:-sessions}
export PATH="$PATH:/usr/local/cuda/bin"   # cuobjdump, nvdisasm and ncu for the audit
export COLUMNS=${COLUMNS:-200}
# A0 first (the null: a second stock process), the variant that might not compile last
VARIANTS=A0,noexp,A1,h15-noclamp,h15-1of2,h15-1of4,h15-wg
sb() { python3 -m softbench "$@" 2> >(grep -v '━' >&2); }
t0=$SECONDS
if [ "$PART" = 1 ]; then
  sb sweep variants --backend fa4 --dtype bf16 --seq 8K --seq 16K --causal --variants "$VARIANTS" --out "$OUTDIR"
else
  sb sweep variants --backend fa4 --dtype bf16 --seq 8K --no-causal --variants "$VARIANTS" --out "$OUTDIR"
  echo "sweep took $((SECONDS - t0)) s"
  sb audit --backend fa4 --dtype bf16 --seq 8K --causal --variants "$VARIANTS" --out "$OUTDIR"
  s=$(ls -d "$OUTDIR"/*-audit-bf16-8K-causal-* 2>/dev/null | tail -1)
  [ -n "$s" ] && cat "$s/summary.md"
fi
echo "part $PART took $((SECONDS - t0)) s"
