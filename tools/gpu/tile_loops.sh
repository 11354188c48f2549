#!/usr/bin/env bash
# Issue 15, prepared 2026-12-03 23:20-23:50 without a GPU; sealed first: sealed/tile-loops.yaml.
# The masked key tiles in a loop of their own (-ml): the hot loop's body without the branch to the masked weights,
# one basic block that ptxas schedules whole; -mlf also holds P.V's wgmma wait below the exponentials, which ptxas
# otherwise hoists above them (the sm_90a cross-compile, tests/test_tile_loops.py). Step 1: the outputs of both
# against the simulation and, bit for bit, against the one-loop kernel (A0 and each dtype's Rowmax-H15 form), then
# causal 8K at equal clock against FA3 in 12 s interleavings: the default, -ml, -mlf, at BF16 and at FP8.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/tile_loops.sh 1`
#          (carry .gpu/b); step 2 while warm: `. /tmp/gpu-site/env.sh && bash tools/gpu/tile_loops.sh 2`
set -uo pipefail
STEP=${1:?step 1, 1b, 2 or 3}
PAYLOAD=
. tools/gpu/lease_step.sh
bf16=gluon-n128s2-c240l24-hg8-rl-ltt-tb
fp8=gluon-n128s2-c240l24-hg8-g1-rla-lmt-tb
fp8_hg2=gluon-n128s2-c240l24-hg2-rla-lmt-tb
latencies() {
  for s in "" -ml -mlf; do
    sb latency "${against_fa3[@]}" "${bf16_sat[@]}" --seq 8192 --budget-s 12 --triton-config $bf16$s
  done
  for s in "" -ml -mlf; do
    sb latency "${against_fa3[@]}" "${fp8_folded[@]}" --seq 8192 --budget-s 12 --triton-config $fp8$s
  done
}
case "$STEP" in
1) timeout 120 python3 tools/gpu/gluon_probe.py "$DIR/probe-loops-bf16" --only=bf16 --checks-only \
     --check-shapes=0,1,4,5 --check-configs=$bf16-ml,$bf16-mlf --check-variants=A0,h15-sat
   timeout 120 python3 tools/gpu/gluon_probe.py "$DIR/probe-loops-fp8" --only=fp8 --checks-only \
     --check-shapes=0,1,4,5 --check-configs=$fp8-ml,$fp8-mlf,$fp8_hg2-mlf --check-variants=A0,h15-folded
   latencies ;;
# step 1 as first run (23:34-23:39) wrote the BF16 probe, printed every FP8 row (all equal to the one loop) but
# reached its 120 s limit before writing them, and timed nothing (the backend did not take the new option yet):
# the timings first, then the FP8 probe with more time
1b) latencies
   timeout 240 python3 tools/gpu/gluon_probe.py "$DIR/probe-loops-fp8" --only=fp8 --checks-only \
     --check-shapes=0,1,4,5 --check-configs=$fp8-ml,$fp8-mlf,$fp8_hg2-mlf --check-variants=A0,h15-folded ;;
# Steps 2 and 3 (prepared 01:40 for the next lease, one call each; the defaults take -mlf since 01:30): the six
# shapes under the defaults with 30 s interleavings; then FP8 causal 8K in two processes per kernel, h15-folded under two consumers hg2 with -mlf,
# and the exponential-free ceiling at BF16 under -mlf
2) for seq in "--seq 8192" "--seq 8192 --no-causal" "--seq 16384"; do
     sb latency "${against_fa3[@]}" "${fp8_folded[@]}" $seq
     sb latency "${against_fa3[@]}" "${bf16_sat[@]}" $seq
   done ;;
3) sb latency "${against_fa3[@]}" "${fp8_folded[@]}" --seq 8192 --processes 2
   sb latency "${against_fa3[@]}" "${fp8_folded[@]}" --seq 8192 --triton-config $fp8_hg2-mlf
   sb latency "${against_fa3[@]}" --dtype bf16 --variant noexp --seq 8192 --budget-s 12 ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "step$STEP"
