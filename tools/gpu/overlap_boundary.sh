#!/usr/bin/env bash
# Issue 15, prepared 2026-12-04 15:00; sealed first: sealed/overlap-boundary.yaml. -pdo (GluonConfig.schedule
# "dynamic-overlap") issues each block's last P.V behind the next block's first Q.K^T and waits for it after that
# tile's weights, so that the tensor core works through the first tile's softmax, with two Q buffers per consumer
# (the next Q loads while the block before runs). sm_90a cross-compile, BF16 causal: with -pm the first consumer
# spills in its key loops; without -pm 2 spill loads per iteration there. So both are screened, each beside the
# -pd schedule of the same options.
# Step 1: -pdo's outputs against the one-block kernel and the simulation (BF16 with and without -pm, FP8 -g1,
#         A0 and h15-folded, ragged shapes, head dims 64 and 128, more blocks than programs, 2 launches in a row);
#         only if every check passes: 12 s screens at BF16 causal 8K against FA3 of -pdo without -pm, -pd without
#         -pm, -pdo with -pm and the -pd default.
# Step 2 (only after step 1 passed): the better -pdo at BF16 causal 16K, 30 s, two processes per kernel, and at
#         BF16 causal 8K, 30 s.
# As run (14:37-14:40): every check passed, bit for bit; the screens read A0 / FA3 0.957 under -pdo without -pm
# against 0.964 under -pd without it, 0.883 under -pdo with -pm (its spills) against the default's 0.999. Step 2 was
# not run (no -pdo was faster). Step 3 instead, with the device time left: where the warps wait and how busy the
# tensor core is, `softbench audit --source-stalls` of A0 at BF16 causal 8K under -pd and -pdo without -pm.
# Step 4 (14:5x, no seal: a follow-up): the first tile's mask select turned out needless (a branch on n_full with a
# wgmma in flight leaves ptxas's schedule as it is; only a wgmma inside a branch serialized them), so -pdo's first
# tile takes the unmasked form again where the block has one. Its outputs checked again (BF16 without -pm), then
# 12 s screens of -pdo and -pd without -pm, alternating twice, and the audit of -pdo again.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/overlap_boundary.sh 1`
#          (carry .gpu/b), and while the host is still held
#          `. /tmp/gpu-site/env.sh && bash tools/gpu/overlap_boundary.sh 2 LABEL`
set -uo pipefail
STEP=${1:?step 1, 2, 3 or 4}
PAYLOAD=
LEASE=overlap-boundary  # apart from other scripts' steps in the same lease (lease_step.sh)
. tools/gpu/lease_step.sh
pdo=gluon-n128s2-c240l24-hg4-pdo-rl-ro-ltt-tb-mlf
pd=gluon-n128s2-c240l24-hg4-pd-rl-ro-ltt-tb-mlf
pdo_pm=gluon-n128s2-c240l24-hg4-pdo-rl-ro-ltt-pm-tb-mlf
pd_pm=gluon-n128s2-c240l24-hg4-pd-rl-ro-ltt-pm-tb-mlf
fp8_pdo=gluon-n128s2-c240l24-hg8-g1-pdo-rla-ro-ltt-tb-mlf
bf16_folded=(--dtype bf16 --variant h15-folded)
case "$STEP" in
1) timeout 200 python3 tools/gpu/gluon_probe.py "$DIR/probe-bf16" --only=bf16 --checks-only \
     --check-shapes=0,2,3,5,6 --check-configs=$pdo,$pdo_pm --check-variants=A0,h15-folded --repeat-equal=2 \
     && timeout 150 python3 tools/gpu/gluon_probe.py "$DIR/probe-fp8" --only=fp8 --checks-only \
     --check-shapes=0,2,6 --check-configs=$fp8_pdo --check-variants=A0,h15-folded --repeat-equal=2 \
     && touch "$DIR/checks-passed" \
     && for cfg in $pdo $pd $pdo_pm $pd_pm; do
          sbt latency "${against_fa3[@]}" "${bf16_folded[@]}" --seq 8192 --budget-s 12 --triton-config $cfg
        done ;;
2) cfg=${2:?the -pdo label step 1 found faster}
   sbt latency "${against_fa3[@]}" "${bf16_folded[@]}" --seq 16384 --processes 2 --triton-config $cfg
   sbt latency "${against_fa3[@]}" "${bf16_folded[@]}" --seq 8192 --triton-config $cfg ;;
4) timeout 200 python3 tools/gpu/gluon_probe.py "$DIR/probe-bf16" --only=bf16 --checks-only \
     --check-shapes=0,2,5,6 --check-configs=$pdo --check-variants=A0,h15-folded --repeat-equal=1 \
     && touch "$DIR/checks-passed" \
     && for cfg in $pdo $pd $pdo $pd; do
          sbt latency "${against_fa3[@]}" "${bf16_folded[@]}" --seq 8192 --budget-s 12 --triton-config $cfg
        done \
     && timeout 120 python3 -m softbench audit --backend triton --dtype bf16 --causal --seq 8192 --variants A0 \
       --source-stalls --triton-config $pdo --out "$DIR" 2>&1 \
       | grep -v "━" | grep -E "tensor|duration|session:" | head -8 ;;
3) for cfg in $pd $pdo; do
     timeout 120 python3 -m softbench audit --backend triton --dtype bf16 --causal --seq 8192 --variants A0 \
       --source-stalls --triton-config $cfg --out "$DIR" 2>&1 \
       | grep -v "━" | grep -E "tensor|duration|SM MHz|wait|barrier|session:|opcode|samples" | head -24
   done ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
