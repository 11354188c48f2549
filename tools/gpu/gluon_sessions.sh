#!/usr/bin/env bash
# Issue 7, second kernel: softbench's Gluon forward (softbench.kernels.gluon_attn) on the H200, b1 h16 d128 8K,
# BF16 (its FP8 path screened slower than the Triton kernel's, 646 against 766 TFLOP/s causal: FP8 stays there),
# in two calls (each under the 10-minute limit). Configuration by label: GLUON_BF16, default the backend's
# default at BF16 on sm_90, gluon-n128s2-c240l24-hg8 (the fastest A0 of tools/gpu/gluon_probe.py).
#   part 1: A0 vs A1 causal and non-causal; stock FA4 A0 at the same shapes (one round: the TFLOP/s of the 85%
#           goal, in the same hour); the non-causal sweep (A0 again: the null, noexp: the ceiling, h15-noclamp)
#   part 2: the causal sweep; `softbench gates` for A1 (causal, non-causal); energy per forward, non-causal
#           (where A1 screened faster than A0), 15 s loops
# Run from the project root after `. /tmp/gpu-site/env.sh`. Sessions go to ${2:-/tmp/softbench-sessions}, outside
# the checkout, and each part packs them into $OUT when it is set.
set -uo pipefail
PART=${1:?part 1 or 2}
OUTDIR=${2:-/tmp/softbench-sessions}
mkdir -p "$OUTDIR"
BF16=${GLUON_BF16:-gluon-n128s2-c240l24-hg8}
export COLUMNS=${COLUMNS:-200}
sb() { python3 -m softbench "$@" 2> >(grep -v '━' >&2); }
t0=$SECONDS
if [ "$PART" = 1 ]; then
  for m in --causal --no-causal; do
    sb latency --backend triton --dtype bf16 --seq 8K "$m" --triton-config "$BF16" --out "$OUTDIR"
    sb latency --backend fa4 --dtype bf16 --seq 8K "$m" --baseline A0 --variant A0 --rounds 1 --out "$OUTDIR"
  done
  sb sweep variants --backend triton --dtype bf16 --seq 8K --no-causal --variants A0,noexp,h15-noclamp \
    --triton-config "$BF16" --out "$OUTDIR"
else
  sb sweep variants --backend triton --dtype bf16 --seq 8K --causal --variants A0,noexp,h15-noclamp \
    --triton-config "$BF16" --out "$OUTDIR"
  for m in --causal --no-causal; do
    sb gates --backend triton --variant A1 --dtype bf16 "$m" --triton-config "$BF16" --out "$OUTDIR"
  done
  sb energy --backend triton --dtype bf16 --seq 8K --no-causal --seconds 15 --triton-config "$BF16" --out "$OUTDIR"
fi
echo "part $PART took $((SECONDS - t0)) s"
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$OUTDIR" "gluon-part$PART"
