#!/usr/bin/env bash
# Issue 15 part 3 on the H200: h15-folded's dNLL beside A1's and h15-sat's, SmolLM2-135M on Austen, 97 x 2048,
# BF16, through softbench's Triton kernel path and the simulation on the GPU. Run 20261201T1250: the simulation's
# session is 125114Z; the kernel path then took three operators in one run and was refused (125041Z, partial). Stage the model first
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
# the kernel path runs one variant beside the stock kernel: one invocation per operator (about 100 s each)
for op in rowmax-h15-folded rowmax-h15; do
  sb fidelity "${common[@]}" --path kernel --backend triton --operator "$op"
done
sb fidelity "${common[@]}" --path sim --device cuda --operator rowmax-h15 --operator rowmax-h15-folded
