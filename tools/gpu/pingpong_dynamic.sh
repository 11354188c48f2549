#!/usr/bin/env bash
# Issue 15, prepared 2026-12-04 15:35; sealed first: sealed/pingpong-dynamic.yaml. The audits of -pde and -pdo
# (overlap_boundary.sh) put their extra wgmma-issue samples in the key loop, the second consumer's most, not at the
# block boundary they changed: a reading is that the boundary sets how the two consumers' loops interleave. -ppn-pd
# imposes the interleaving: the named-barrier ping-pong (one consumer issues its wgmmas while the other computes its
# softmax), now under the dynamic schedule, the turns running on from block to block.
# Step 1: -ppn-pd's outputs against the one-block kernel and the simulation (BF16, the 16-bit default's options, A0
#         and h15-folded, ragged shapes, head dims 64 and 128, more blocks than programs, 2 launches in a row); only
#         if every check passes: 12 s screens at BF16 causal 8K against FA3, -ppn-pd and the -pd default
#         alternating, twice.
# Step 2 (only after step 1): BF16 causal 16K, 30 s, two processes per kernel, -ppn-pd then the default; BF16
#         non-causal 8K, 12 s, -ppn-pd.
# As run (15:27-15:35): every check passed; A0 / FA3 at BF16 causal 8K 0.998 and 0.997 under -ppn-pd against 0.999
# and 0.992 under -pd, alternating; causal 16K 0.995 against 0.996; non-causal 8K A0 the fastest exact kernel.
# Step 3, with the device time left (no seal, a diagnosis): `softbench audit --source-stalls` of A0 at BF16 causal 8K
# under -pd and -ppn-pd: does the ping-pong change where the key loop's wgmmas wait?
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/pingpong_dynamic.sh 1`
#          (carry .gpu/b), and while the host is still held
#          `. /tmp/gpu-site/env.sh && bash tools/gpu/pingpong_dynamic.sh 2`
set -uo pipefail
STEP=${1:?step 1, 2 or 3}
PAYLOAD=
LEASE=pingpong-dynamic  # apart from other scripts' steps in the same lease (lease_step.sh)
. tools/gpu/lease_step.sh
ppn=gluon-n128s2-c240l24-hg4-ppn-pd-rl-ro-ltt-pm-tb-mlf
pd=gluon-n128s2-c240l24-hg4-pd-rl-ro-ltt-pm-tb-mlf
bf16_folded=(--dtype bf16 --variant h15-folded)
case "$STEP" in
1) timeout 200 python3 tools/gpu/gluon_probe.py "$DIR/probe-bf16" --only=bf16 --checks-only \
     --check-shapes=0,2,3,5,6 --check-configs=$ppn --check-variants=A0,h15-folded --repeat-equal=2 \
     && touch "$DIR/checks-passed" \
     && for cfg in $ppn $pd $ppn $pd; do
          sbt latency "${against_fa3[@]}" "${bf16_folded[@]}" --seq 8192 --budget-s 12 --triton-config $cfg
        done ;;
2) for cfg in $ppn $pd; do
     sbt latency "${against_fa3[@]}" "${bf16_folded[@]}" --seq 16384 --processes 2 --triton-config $cfg
   done
   sbt latency "${against_fa3[@]}" "${bf16_folded[@]}" --seq 8192 --no-causal --budget-s 12 --triton-config $ppn ;;
3) for cfg in $pd $ppn; do
     timeout 120 python3 -m softbench audit --backend triton --dtype bf16 --causal --seq 8192 --variants A0 \
       --source-stalls --triton-config $cfg --out "$DIR" 2>&1 | grep -v "━" | grep -E "tensor|duration|session:" | head -8
   done ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
