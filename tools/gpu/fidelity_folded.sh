#!/usr/bin/env bash
# Issue 15 part 3 on the H200: h15-folded's dNLL beside A1's and h15-sat's, SmolLM2-135M on Austen, 97 x 2048,
# BF16, through softbench's Triton kernel path and the simulation on the GPU. Stage the model first
# (bash tools/stage_model.sh; one device call per part), then on the host:
#   . /tmp/softbench-model/env.sh && bash tools/gpu/fidelity_folded.sh OUTDIR
set -uo pipefail
OUTDIR=${1:?usage: fidelity_folded.sh SESSIONS_DIR (outside the checkout)}
: "${SOFTBENCH_MODEL_FILE:?. /tmp/softbench-model/env.sh first (tools/stage_model.sh)}"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
mkdir -p "$OUTDIR"
sb() { local t0=$SECONDS; python3 -m softbench "$@" 2>&1 | grep -v '━'; echo "wall $((SECONDS - t0)) s: softbench $*"; }
common=(--model "$SOFTBENCH_MODEL_FILE" --corpus "$SOFTBENCH_AUSTEN_TEXT" --block-len 2048 --max-blocks 97
        --dtype bf16 --bootstrap 5000 --seed 0 --out "$OUTDIR")
sb fidelity "${common[@]}" --path kernel --backend triton --operator rowmax-h15 --operator rowmax-h15-sat \
   --operator rowmax-h15-folded
sb fidelity "${common[@]}" --path sim --device cuda --operator rowmax-h15 --operator rowmax-h15-folded
