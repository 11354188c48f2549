#!/usr/bin/env bash
# One device lease in seven calls (2026-12-01, afternoon): the payload that issue 18's fidelity runs need (FA3's
# wheel, two corpora, Gemma-3-270M and SmolLM2-135M, about 390 MB) travels in seven chunks of 56 MiB
# (tools/gpu/payload.py), one per call, and each call also measures what needs only what has arrived by then.
#   here:  python3 tools/gpu/payload.py pack .gpu/pay --chunk-mib 56 FA3_WHEEL=... SOFTBENCH_SECOND_TEXT=kjv.txt \
#            SOFTBENCH_AUSTEN_TEXT=austen.txt GGUF_WHEEL=... SOFTBENCH_GEMMA3_FILE=... SOFTBENCH_MODEL_FILE=...
#   host:  bash tools/gpu/issue14_18.sh N     (carry .gpu/pay/cN), N = 1..7, calls back to back (30 s idle ends
#          the lease and its /tmp)
# Steps: 1 BF16 h15-sat with the null and FA3, three invocations (issue 14's missed null); 2 A/A over three
# rounds of one process pair, BF16 twice and FP8 once (does an A/A offset belong to the process pair?); 3 the
# hybrids h15-1of4/h15-1of2 beside h15-folded, the null and FA3 (issue 15); 4 the six-kernel FP8 sweep again;
# 5-6 Gemma-3-270M, BOS per block, sim and row paths on Austen and the KJV (issue 18); 7 SmolLM2-135M through the
# Triton kernel path and the simulation on both corpora (issue 18).
set -uo pipefail
STEP=${1:?step 1..7}
PAYLOAD=.gpu/pay
. tools/gpu/lease_step.sh
lat=(latency --backend triton --seq 8192)
fid=(fidelity --dtype bf16 --bootstrap 5000 --seed 0 --max-blocks 97)
case "$STEP" in
1) python3 -c "import fa3_fwd_interface; print('fa3', fa3_fwd_interface.__file__)"
   sb env --record
   for i in 1 2 3; do sb "${lat[@]}" --dtype bf16 --variant h15-sat --null --reference fa3; done ;;
2) # A/A over three rounds of one process pair, twice at BF16 and once at FP8: an offset that belongs to the pair
   # repeats in every round of that invocation and changes between invocations
   for dt in bf16 bf16 fp8; do sb "${lat[@]}" --dtype "$dt" --variant A0 --reference none --rounds 3 --budget-s 15; done ;;
3) for dt in fp8 bf16; do
     sb sweep variants --backend triton --dtype "$dt" --seq 8192 --baseline A0 --variants h15-folded,h15-1of4,h15-1of2 \
        --null --reference fa3
   done ;;
4) sb sweep variants --backend triton --dtype fp8 --seq 8192 --baseline A0 --variants h15-folded,h15-sat,A1 --null \
      --reference fa3 ;;
5) g=("${fid[@]}" --model "$SOFTBENCH_GEMMA3_FILE" --path sim --device cuda --operator rowmax-h15 --operator rowmax-h15-sat)
   # sliding window 512: the tile-wise simulation takes blocks within it
   sb "${g[@]}" --corpus "$SOFTBENCH_AUSTEN_TEXT" --block-len 512
   sb "${g[@]}" --corpus "$SOFTBENCH_SECOND_TEXT" --block-len 512 ;;
6) # step 5 ran BOS stream (auto did not see the GGUF tokenizer's BOS): the same runs with BOS in every block
   g=("${fid[@]}" --model "$SOFTBENCH_GEMMA3_FILE" --path sim --device cuda --operator rowmax-h15 --operator rowmax-h15-sat --bos block)
   sb "${g[@]}" --corpus "$SOFTBENCH_AUSTEN_TEXT" --block-len 512
   sb "${g[@]}" --corpus "$SOFTBENCH_SECOND_TEXT" --block-len 512 ;;
7) s=("${fid[@]}" --model "$SOFTBENCH_MODEL_FILE" --block-len 2048)
   for op in rowmax-h15 rowmax-h15-sat; do
     sb "${s[@]}" --corpus "$SOFTBENCH_AUSTEN_TEXT" --path kernel --backend triton --operator "$op"
   done
   for c in "$SOFTBENCH_AUSTEN_TEXT" "$SOFTBENCH_SECOND_TEXT"; do
     sb "${s[@]}" --corpus "$c" --path sim --device cuda --operator rowmax-h15 --operator rowmax-h15-sat
   done ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "step$STEP"
