#!/usr/bin/env bash
# Issue 6, part 1: `softbench audit` on the H200 (sm_90) -- static SASS of the attention forward and one Nsight
# Compute launch per variant, BF16 8K causal and non-causal, variants A0, A1 and noexp.
# Run from the project root on the GPU host after `. /tmp/gpu-site/env.sh`; sessions go to ${1:-sessions}.
# Runtime: about 3 minutes (two shapes x three variants; each variant is one process under ncu: FA4 import ~9 s,
# compile 2-5 s, ncu attach and one profiled launch ~10-20 s; cuobjdump a second or two). Each session holds the
# cubins (a few MB), the SASS (gzipped above 1 MB), the ncu reports and CSVs: pack the folder into $OUT yourself.
set -uo pipefail
OUTDIR=${1:-sessions}
export PATH="$PATH:/usr/local/cuda/bin"   # cuobjdump, nvdisasm and ncu live there on the GPU host
export COLUMNS=${COLUMNS:-230}            # rich tables: wide enough for every column when stdout is not a tty
sb() { python3 -m softbench "$@" 2> >(grep -v '━' >&2); }
t0=$SECONDS
for mask in --causal --no-causal; do
  sb audit --backend fa4 --dtype bf16 --seq 8K "$mask" --variants A0,A1,noexp --out "$OUTDIR"
  echo "audit exit code ($mask): $?"
done
# the Markdown summaries: the same tables, plus the per-family breakdown, notes and errors of each step
for s in $(ls -d "$OUTDIR"/*-audit-bf16-8K-* 2>/dev/null | tail -2); do
  echo; echo "=== $s"; cat "$s/summary.md"
done
echo "audit.sh took $((SECONDS - t0)) s"
