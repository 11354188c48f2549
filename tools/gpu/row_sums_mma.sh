#!/usr/bin/env bash
# Issue 15: the row sums on the tensor core (-lm, GluonConfig.row_sum "mma"), built 2026-12-02 12:01-12:16 without
# a GPU. The stall samples of 20261202T112719Z say h15-folded's FP8 loop is bound by the instructions it issues
# (7.0 per score against FA3's 5.9); -lm replaces the row sums' 64 FADD per tile and thread with one m64n8 wgmma per
# key step beside P.V's (P times a tile of ones): the FP8 loop 955 -> 899 instructions (A0), 901 -> 848
# (h15-folded), BF16 973 -> 916, no spills (sm_90a cross-compile). It sums P as P.V reads it, so it is checked
# against the simulation with sums of the rounded P (sim_attention's sum_rounded).
# Step 1: checked against the simulation at FP8 (-g1, also with -rs: O's rescale skipped where no row of a warp
# moved its maximum, the other 64 instructions per tile that are not the exponential's) and BF16, then FP8 causal 8K
# beside the default.
# Step 2: FP8 causal 8K with -rs-lm; BF16 causal 8K beside the default; FP8 causal 8K sustained; the gates under -lm.
# Step 3: FP8 non-causal 8K and causal 16K beside the default; softbench audit --source-stalls of FP8 -g1-lm-tb.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh && . /tmp/gpu-site/env.sh && bash tools/gpu/row_sums_mma.sh 1` (carry .gpu/b), then
#          `. /tmp/gpu-site/env.sh && bash tools/gpu/row_sums_mma.sh N` for N = 2, 3 while the host is still held
# Predicted and sealed first (sealed/gluon-row-sums-mma.yaml): score with
# `softbench evaluate sealed/gluon-row-sums-mma.yaml --sessions sessions`.
set -uo pipefail
STEP=${1:?step 1..3}
PAYLOAD=
. tools/gpu/lease_step.sh
common=(--backend triton --null --reference fa3 --start-order shuffled)
fp8=(--dtype fp8 --variant h15-folded)
bf16=(--dtype bf16 --variant h15-sat)
lm8=gluon-n128s2-c240l24-hg8-g1-lm-tb
lm16=gluon-n128s2-c240l24-hg8-lm-tb
rslm8=gluon-n128s2-c240l24-hg8-g1-rs-lm-tb
case "$STEP" in
1) timeout 240 python3 tools/gpu/gluon_probe.py "$DIR/probe-lm-fp8" --only=fp8 --checks-only \
     --check-configs=$lm8,$rslm8 --check-variants=A0,h15-folded --repeat-equal=2 \
     && timeout 120 python3 tools/gpu/gluon_probe.py "$DIR/probe-lm-bf16" --only=bf16 --checks-only \
     --check-configs=$lm16 --check-variants=A0,h15-sat && touch /tmp/sb/lm-ok
   if [ -f /tmp/sb/lm-ok ]; then
     sb latency "${common[@]}" "${fp8[@]}" --seq 8192 --triton-config $lm8
     sb latency "${common[@]}" "${fp8[@]}" --seq 8192
   else echo "-lm probe failed: no timing follows"; fi ;;
2) sb latency "${common[@]}" "${fp8[@]}" --seq 8192 --triton-config $rslm8
   sb latency "${common[@]}" "${bf16[@]}" --seq 8192 --triton-config $lm16
   sb latency "${common[@]}" "${bf16[@]}" --seq 8192
   sb latency "${common[@]}" "${fp8[@]}" --seq 8192 --protocol sustained --triton-config $lm8
   for c in --causal --no-causal; do sb gates --backend triton --dtype fp8 $c --variant h15-folded --triton-config $lm8; done ;;
3) for seq in "--seq 8192 --no-causal" "--seq 16384"; do
     sb latency "${common[@]}" "${fp8[@]}" $seq --triton-config $lm8
     sb latency "${common[@]}" "${fp8[@]}" $seq
   done
   timeout 240 python3 -m softbench audit --backend triton --dtype fp8 --seq 8192 --causal --variants A0,h15-folded \
     --triton-config $lm8 --reference fa3 --source-stalls --out "$DIR" 2>&1 | grep -v "━" | tail -30 ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "step$STEP"
