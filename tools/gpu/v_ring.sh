#!/usr/bin/env bash
# Issue 15, prepared 2026-12-04 19:15; sealed first: sealed/v-ring.yaml. Under -ka (the 16-bit default since 17:40)
# the audit at BF16 causal 16K put more of the consumers' samples at the V waits than at the K waits
# (20261204T172302Z): V(i) is issued once P.V(i - 2) has completed, and K(i + 2) waits behind it. -v3 gives V a
# ring of three buffers, K keeping two (gluon_config.GluonConfig.v_stages); the consumers' code reads the same tiles.
# Step 1: -v3's outputs against the one-block kernel and the simulation (BF16 under the 16-bit default's options, A0
#         and h15-folded; FP8 under the FP8 default's, A0 and h15-folded; ragged shapes, head dims 64 and 128, more
#         blocks than programs, 2 launches in a row); only if every check passes: BF16 causal 16K against FA3, 30 s,
#         two processes per kernel, -v3 and the default alternating, twice (v3, ka, ka, v3).
# Step 2: BF16 causal 8K the same way (30 s, two processes per kernel, v3, ka, ka, v3); BF16 non-causal 8K (12 s,
#         v3 then ka); FP8 causal 8K (12 s, h15-folded, the FP8 default with -v3 then without).
# Step 3 (no seal): the BF16 exponential-free ceiling under the 16-bit default (noexp against A0, FA3 in the run,
#         causal 8K, 12 s; last measured before -ka), and `softbench audit --source-stalls` of A0 at BF16 causal
#         16K under -v3 (beside -ka's 20261204T172302Z).
# Step 4 (added after 1-3, no seal): step 3 read noexp level with A0 at BF16 causal 8K under -ka (+0.29% and +0.36%
#         against FA3 per pair), where before -ka it was 1.7% ahead: noexp against A0 at causal 8K and 16K, 30 s,
#         two processes per kernel, to settle whether the exponential still costs A0 anything at BF16.
# Step 5 (added after 1-4; sealed/v-ring-paired.yaml): tools/analysis/mbarrier_waits.py on step 3's audit puts
#         the producer under -ka-v3 at one wait, K's free slot (10,215 samples at its branch), and the consumers' V
#         waits barely lower (2,477 against -ka's 2,823): V(i) is issued behind K(i + 1), whose slot frees only once
#         both consumers' Q.K^T(i - 1) has completed. In pairs with three V buffers (-v3 without -ka) V(i) goes out
#         with K(i), an iteration earlier, and K waits for nothing but its own slot, as under -ka. BF16 causal 16K,
#         30 s, two processes per kernel, the pairs with -v3 then the default; causal 8K, 12 s, the same two.
# Step 6 (prepared after 1-5, NOT RUN: the session's device time was spent; seal it before running): the other way
#         round, K's ring three long and V's two (-ka, s3-v2: the same 229,904 bytes of shared memory). Step 3's audit
#         puts the producer under -v3 at K's free slot alone, and the consumers still wait for K (1,357 and 1,036
#         samples at their branches): K(i + 2) cannot leave before both consumers' Q.K^T(i) has completed.
# Step 7 (added with step 6's seal, sealed/k-ring.yaml): BF16 causal 8K the same two, 12 s each (s3-v2, then -ka).
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/v_ring.sh 1`
#          (carry .gpu/b), and while the host is still held `. /tmp/gpu-site/env.sh && bash tools/gpu/v_ring.sh 2`
set -uo pipefail
STEP=${1:?step 1 to 7}
PAYLOAD=
LEASE=v-ring  # apart from other scripts' steps in the same lease (lease_step.sh)
. tools/gpu/lease_step.sh
ka=gluon-n128s2-c240l24-hg4-pd-rl-ro-ltt-pm-tb-mlf-ka
v3=$ka-v3
paired_v3=gluon-n128s2-c240l24-hg4-pd-rl-ro-ltt-pm-tb-mlf-v3
k3=gluon-n128s3-c240l24-hg4-pd-rl-ro-ltt-pm-tb-mlf-ka-v2
fp8=gluon-n128s2-c240l24-hg8-g1-pd-rla-lmt-tb-mlf
fp8_v3=$fp8-v3
bf16_folded=(--dtype bf16 --variant h15-folded)
# one BF16 causal shape, 30 s with two processes per kernel, -v3 and the default alternating twice
pairs_30s() {
  for cfg in $v3 $ka $ka $v3; do
    sbt latency "${against_fa3[@]}" "${bf16_folded[@]}" --seq "$1" --processes 2 --triton-config $cfg
  done
}
case "$STEP" in
1) timeout 200 python3 tools/gpu/gluon_probe.py "$DIR/probe-bf16" --only=bf16 --checks-only \
     --check-shapes=0,2,3,5,6 --check-configs=$v3 --check-variants=A0,h15-folded --repeat-equal=2 \
     && timeout 150 python3 tools/gpu/gluon_probe.py "$DIR/probe-fp8" --only=fp8 --checks-only \
     --check-shapes=0,2,6 --check-configs=$fp8_v3 --check-variants=A0,h15-folded --repeat-equal=2 \
     && touch "$DIR/checks-passed" \
     && pairs_30s 16384 ;;
2) pairs_30s 8192
   for cfg in $v3 $ka; do
     sbt latency "${against_fa3[@]}" "${bf16_folded[@]}" --seq 8192 --no-causal --budget-s 12 --triton-config $cfg
   done
   for cfg in $fp8_v3 $fp8; do
     sbt latency "${against_fa3[@]}" "${fp8_folded[@]}" --seq 8192 --budget-s 12 --triton-config $cfg
   done ;;
3) sbt latency "${against_fa3[@]}" --dtype bf16 --variant noexp --seq 8192 --budget-s 12 --triton-config $ka
   timeout 150 python3 -m softbench audit --backend triton --dtype bf16 --causal --seq 16384 --variants A0 \
     --source-stalls --triton-config $v3 --out "$DIR" 2>&1 | grep -v "━" | grep -E "tensor|duration|session:" | head -8 ;;
4) for seq in 8192 16384; do
     sbt latency "${against_fa3[@]}" --dtype bf16 --variant noexp --seq $seq --processes 2 --triton-config $ka
   done ;;
5) for cfg in $paired_v3 $ka; do
     sbt latency "${against_fa3[@]}" "${bf16_folded[@]}" --seq 16384 --processes 2 --triton-config $cfg
   done
   for cfg in $paired_v3 $ka; do
     sbt latency "${against_fa3[@]}" "${bf16_folded[@]}" --seq 8192 --budget-s 12 --triton-config $cfg
   done ;;
6) timeout 200 python3 tools/gpu/gluon_probe.py "$DIR/probe-bf16" --only=bf16 --checks-only \
     --check-shapes=0,2,3,5,6 --check-configs=$k3 --check-variants=A0,h15-folded --repeat-equal=2 \
     && touch "$DIR/checks-passed" \
     && for cfg in $k3 $ka $ka $k3; do
       sbt latency "${against_fa3[@]}" "${bf16_folded[@]}" --seq 16384 --processes 2 --triton-config $cfg
     done ;;
7) for cfg in $k3 $ka; do
     sbt latency "${against_fa3[@]}" "${bf16_folded[@]}" --seq 8192 --budget-s 12 --triton-config $cfg
   done ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
