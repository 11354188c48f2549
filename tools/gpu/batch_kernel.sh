#!/usr/bin/env bash
# One device call (~8 minutes): correctness gates (issue 4), the instruction/counter audit (issue 6), and the
# issue-6 variants against stock FA4 at BF16 (causal 8K/16K, non-causal 8K). Sessions go to ${1:-sessions};
# then pack them into $OUT (readback tensors stay behind: they are large and re-creatable).
set -uo pipefail
OUTDIR=${1:-sessions}
t0=$SECONDS
bash tools/gpu/gates.sh "$OUTDIR" 2>&1 | grep -v '━'
echo "gates took $((SECONDS - t0)) s"
bash tools/gpu/audit.sh "$OUTDIR" 2>&1 | grep -v '━'
t1=$SECONDS
python3 -m softbench sweep variants --backend fa4 --dtype bf16 --seq 8K --seq 16K --causal \
  --variants h15-1of4,h15-1of2 --out "$OUTDIR" 2>&1 | grep -v '━'
python3 -m softbench sweep variants --backend fa4 --dtype bf16 --seq 8K --no-causal \
  --variants h15-1of4,h15-1of2 --out "$OUTDIR" 2>&1 | grep -v '━'
echo "variant sweeps took $((SECONDS - t1)) s; batch took $((SECONDS - t0)) s"
