# Sourced by tools/gpu/fidelity*.sh: the protocol every SmolLM2 fidelity run on the GPU host shares (the staged
# model and Austen text, 97 aligned blocks of 2048 tokens, BF16, 5000 paired block-bootstrap replicates, seed 0)
# as the array `common`, sessions into OUTDIR (the script's first argument, default sessions), and `sb`, softbench
# with the model loaders' progress bars filtered out. Needs `. /tmp/softbench-model/env.sh` (tools/stage_model.sh).
set -uo pipefail
OUTDIR=${1:-sessions}
: "${SOFTBENCH_MODEL_FILE:?run . /tmp/softbench-model/env.sh first (tools/stage_model.sh stages it)}"
: "${SOFTBENCH_AUSTEN_TEXT:?run . /tmp/softbench-model/env.sh first}"
export PYTHONUNBUFFERED=1
noise='━|Converting and de-quantizing|Loading weights'
sb() { python3 -m softbench "$@" 2>&1 | grep -v -E "$noise"; return "${PIPESTATUS[0]}"; }
common=(--model "$SOFTBENCH_MODEL_FILE" --corpus "$SOFTBENCH_AUSTEN_TEXT" --block-len 2048 --max-blocks 97
        --dtype bf16 --bootstrap 5000 --seed 0 --out "$OUTDIR")
status=0
