#!/usr/bin/env bash
# Issue 7, second kernel: softbench's Gluon forward (softbench.kernels.gluon_attn) on the H200, b1 h16 d128 8K,
# BF16 (its FP8 path screened slower than the Triton kernel's, 646 against 766 TFLOP/s causal: FP8 stays there),
# in two calls (each under the 10-minute limit). Configuration by label: GLUON_BF16, default the backend's
# default at BF16 on sm_90, gluon-n128s2-c240l24-hg8 (the fastest A0 of tools/gpu/gluon_probe.py).
#   part 1: A0 vs A1 causal and non-causal; stock FA4 A0 at the same shapes (one round: the TFLOP/s of the 85%
#           goal, in the same hour); the non-causal sweep (A0 again: the null, noexp: the ceiling, h15-noclamp)
#   part 2: the causal sweep; `softbench gates` for A1 (causal, non-causal); energy per forward, non-causal
#           (where A1 screened faster than A0), 15 s loops
#   part 3: FP8 after the P-operand change (keys renumbered so that P needs no shuffles): the probe's FP8 checks
#           and timings, then, only if its fastest Gluon A0 beats the Triton kernel's, with that configuration the
#           FP8 causal 8K sweep (A0 again, noexp, A1, h15-noclamp), the design card's FP8 causal 16K latency
#           (3 rounds) and the FP8 gates
#   part 4: BF16 with ping-pong between the consumers (-pp): the probe's BF16 checks and timings (with FA4), then
#           A0 vs A1 causal and non-causal with GLUON_BF16_PP (default gluon-n128s2-c240l24-hg8-pp) and stock FA4
#           A0 at the same shapes (one round, the same hour)
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
elif [ "$PART" = 3 ]; then
  PROBE=/tmp/softbench-gluon-probe
  python3 tools/gpu/gluon_probe.py "$PROBE" --only=fp8 ${GLUON_CHECK_CONFIGS:+--check-configs=$GLUON_CHECK_CONFIGS} 2>&1 | grep -v "UserWarning\|exe_args" | cut -c1-260
  ok=${PIPESTATUS[0]}
  cp "$PROBE/gluon_probe.json" "${OUT:-/tmp}/" 2>/dev/null || true
  if [ "$ok" != 0 ]; then echo "gluon probe: a check failed; no FP8 sessions"; exit 1; fi
  read -r G FASTER <<< "$(python3 -c "import json; b = json.load(open('$PROBE/gluon_probe.json'))['meta']['best_a0']; \
g, t = b['fp8-causal-gluon'], b['fp8-causal-triton']; print(g['kernel'], g['tflops'] > t['tflops'])")"
  echo "fastest Gluon FP8 A0: $G (faster than the Triton kernel's: $FASTER)"
  if [ "$FASTER" = True ]; then
    sb sweep variants --backend triton --dtype fp8 --seq 8K --causal --variants A0,noexp,A1,h15-noclamp \
      --triton-config "$G" --out "$OUTDIR"
    [ -z "${GLUON_SWEEP_ONLY:-}" ] && sb latency --backend triton --dtype fp8 --seq 16384 --causal --rounds 3 \
      --triton-config "$G" --out "$OUTDIR"
    [ -z "${GLUON_SWEEP_ONLY:-}" ] && sb gates --backend triton --variant A1 --dtype fp8 --causal --triton-config "$G" \
      --out "$OUTDIR"
  fi
elif [ "$PART" = 4 ]; then
  PROBE=/tmp/softbench-gluon-probe-bf16
  timeout 400 python3 tools/gpu/gluon_probe.py "$PROBE" --only=bf16 --fa4 2>&1 | grep -v "UserWarning\|exe_args" \
    | grep -v '"ok": true' | cut -c1-260
  ok=${PIPESTATUS[0]}
  cp "$PROBE/gluon_probe.json" "${OUT:-/tmp}/" 2>/dev/null || true
  if [ "$ok" != 0 ]; then echo "gluon probe: a check failed or it timed out ($ok); no sessions"; exit 1; fi
  PP=${GLUON_BF16_PP:-gluon-n128s2-c240l24-hg8-pp}
  for m in --causal --no-causal; do
    sb latency --backend triton --dtype bf16 --seq 8K "$m" --triton-config "$PP" --out "$OUTDIR"
    sb latency --backend fa4 --dtype bf16 --seq 8K "$m" --baseline A0 --variant A0 --rounds 1 --out "$OUTDIR"
  done
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
