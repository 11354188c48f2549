#!/usr/bin/env bash
# Issue 15: A0's running maximum moved lazily (-rl, GluonConfig.rescale "lazy"), built 2026-12-02 13:58-14:05
# without a GPU. -rs (O's rescale jumped over by a warp whose 16 rows all kept their maximum) gave FP8 nothing,
# and on random inputs at causal 8K a warp keeps all 16 maxima in only ~38% of tiles (52% non-causal). With FA4's
# conditional rescale (the maximum moves only when a tile's exceeds it by more than 2 octaves at FP8, 8 at BF16)
# ~89% (91%) of tiles skip the 64 multiplies per thread; at FP8 the weights' offset is lowered from 2^8 to 2^6 so
# the largest weight stays within 2^8. A0 only: Rowmax-H15's forms anchor their lattice at the exact maximum.
# Step 1: FP8 -g1-rl-lmt-tb checked against the simulation (A0 with the lazy maximum, h15-folded), A0 against exact
# FP32 at the benchmark's shapes beside the default and FA3; BF16 -rl-tb checked; FP8 causal 8K and BF16 causal 8K
# timed against FA3.
# Step 2: FP8 non-causal 8K and causal 16K, BF16 non-causal 8K and causal 16K under -rl.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh && . /tmp/gpu-site/env.sh && bash tools/gpu/lazy_rescale.sh 1` (carry .gpu/b),
#          then `. /tmp/gpu-site/env.sh && bash tools/gpu/lazy_rescale.sh 2` while the host is still held
# Predicted and sealed first (sealed/gluon-lazy-rescale.yaml): score with
# `softbench evaluate sealed/gluon-lazy-rescale.yaml --sessions sessions`.
set -uo pipefail
STEP=${1:?step 1..2}
PAYLOAD=
. tools/gpu/lease_step.sh
rl8=gluon-n128s2-c240l24-hg8-g1-rl-lmt-tb
rl16=gluon-n128s2-c240l24-hg8-rl-tb
case "$STEP" in
1) timeout 150 python3 tools/gpu/gluon_probe.py "$DIR/probe-rl-fp8" --only=fp8 --checks-only \
     --check-configs=$rl8 --check-variants=A0,h15-folded --repeat-equal=1 --long-checks && touch /tmp/sb/rl8-ok
   timeout 100 python3 tools/gpu/gluon_probe.py "$DIR/probe-rl-bf16" --only=bf16 --checks-only \
     --check-configs=$rl16 --check-variants=A0 && touch /tmp/sb/rl16-ok
   [ -f /tmp/sb/rl8-ok ] && sb latency "${against_fa3[@]}" "${fp8_folded[@]}" --seq 8192 --triton-config $rl8
   [ -f /tmp/sb/rl16-ok ] && sb latency "${against_fa3[@]}" "${bf16_sat[@]}" --seq 8192 --triton-config $rl16 ;;
2) if [ -f /tmp/sb/rl8-ok ]; then
     for seq in "--seq 8192 --no-causal" "--seq 16384"; do sb latency "${against_fa3[@]}" "${fp8_folded[@]}" $seq --triton-config $rl8; done
   fi
   if [ -f /tmp/sb/rl16-ok ]; then
     for seq in "--seq 8192 --no-causal" "--seq 16384"; do sb latency "${against_fa3[@]}" "${bf16_sat[@]}" $seq --triton-config $rl16; done
   fi ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "step$STEP"
