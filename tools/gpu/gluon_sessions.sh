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
#   part 5: after P's FP8 operand is packed at the wgmma (one PRMT per four keys) and h15-proved and h15-sat
#           joined the Gluon kernel: the probe (BF16 checks of P5_BF16 variants, default A1,h15-proved,h15-sat;
#           FP8 checks of P5_FP8, default every variant, at two configurations; FP8 timings of every variant;
#           writes $OUT/gluon_probe_{bf16,fp8}.json)
#   part 6: the sessions of part 5's findings, with GLUON_FP8 (default gluon-n128s4-c240l24-hg8): the FP8 causal
#           8K sweep in the Gluon kernel (A0 again, A1, h15-proved, h15-sat, h15-noclamp, noexp), the Triton
#           kernel's FP8 A0 at the same shape (one round: the TFLOP/s to compare, same hour), the design card's
#           FP8 causal 16K latency (3 rounds) for A1, h15-proved and h15-sat, the FP8 gates for the three, and BF16
#           causal and non-causal A0 against h15-proved and h15-sat (the Gluon default configuration)
#   part 7: with the backend's defaults (Gluon at FP8 too, gluon-n128s2-c240l24-hg8-g1): the design card's
#           first example as written (softbench latency --dtype fp8 --seq 16384 --rounds 3, --backend triton, A1)
#           and with h15-sat; energy per forward at FP8 causal 8K, A0 against h15-sat (15 s loops)
#   part 8: a second FP8 causal 8K sweep with the backend's defaults (no label: Gluon -g1), A0 again, A1,
#           h15-proved, h15-sat, noexp: does part 6's ordering (and its high second round) repeat?
# Run from the project root after `. /tmp/gpu-site/env.sh`. Sessions go to ${2:-/tmp/softbench-sessions}, outside
# the checkout, and each part packs them into $OUT when it is set.
set -uo pipefail
PART=${1:?part 1 to 6}
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
elif [ "$PART" = 5 ]; then
  ok=0
  for spec in "bf16 gluon-n128s2-c240l24-hg8 ${P5_BF16:-A1,h15-proved,h15-sat}" \
              "fp8 gluon-n128s4-c240l24-hg8,gluon-n128s2-c240l24-hg8-g1 ${P5_FP8:-A0,A1,h15-proved,h15-sat,h15-noclamp}"; do
    read -r DT CONFIGS VARIANTS <<< "$spec"
    PROBE=/tmp/softbench-gluon-probe-$DT
    timeout 280 python3 tools/gpu/gluon_probe.py "$PROBE" --only="$DT" --check-configs="$CONFIGS" \
      --check-variants="$VARIANTS" $([ "$DT" = bf16 ] && echo --checks-only) 2>&1 \
      | grep -v "UserWarning\|exe_args" | grep -v '"ok": true' | cut -c1-300
    [ "${PIPESTATUS[0]}" = 0 ] || ok=1
    python3 -c "import json; r = json.load(open('$PROBE/gluon_probe.json'))['rows']; c = [x for x in r if 'check' in x]; \
print('$DT checks:', len(c), 'ok:', sum(x['ok'] for x in c), 'proved==A1:', sum(x.get('proved_equals_a1', False) for x in c))"
    cp "$PROBE/gluon_probe.json" "${OUT:-/tmp}/gluon_probe_$DT.json" 2>/dev/null || true
  done
  python3 -c "import json; r = json.load(open('/tmp/softbench-gluon-probe-fp8/gluon_probe.json'))['rows']; \
[print(x['kernel'], x['variant'], x.get('tflops'), x.get('error', '')) for x in r if 'timing' in x]"
  echo "probe status: $ok"
elif [ "$PART" = 6 ]; then
  G=${GLUON_FP8:-gluon-n128s4-c240l24-hg8}
  sb sweep variants --backend triton --dtype fp8 --seq 8K --causal \
    --variants A0,A1,h15-proved,h15-sat,h15-noclamp,noexp --triton-config "$G" --out "$OUTDIR"
  sb latency --backend triton --dtype fp8 --seq 8K --causal --baseline A0 --variant A0 --rounds 1 \
    --triton-config m64n128w4s3-vk-tma-hg16 --out "$OUTDIR"
  for v in A1 h15-proved h15-sat; do
    sb latency --backend triton --dtype fp8 --seq 16384 --causal --rounds 3 --variant "$v" --triton-config "$G" \
      --out "$OUTDIR"
    sb gates --backend triton --variant "$v" --dtype fp8 --causal --triton-config "$G" --out "$OUTDIR"
  done
  for m in --causal --no-causal; do
    for v in h15-proved h15-sat; do
      sb latency --backend triton --dtype bf16 --seq 8K "$m" --variant "$v" --triton-config "$BF16" --out "$OUTDIR"
    done
  done
elif [ "$PART" = 7 ]; then
  sb latency --backend triton --dtype fp8 --seq 16384 --rounds 3 --out "$OUTDIR"
  sb latency --backend triton --dtype fp8 --seq 16384 --rounds 3 --variant h15-sat --out "$OUTDIR"
  sb energy --backend triton --dtype fp8 --seq 8K --causal --seconds 15 --order A0,h15-sat,h15-sat,A0 \
    --out "$OUTDIR"
elif [ "$PART" = 8 ]; then
  sb sweep variants --backend triton --dtype fp8 --seq 8K --causal --variants A0,A1,h15-proved,h15-sat,noexp \
    --out "$OUTDIR"
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
