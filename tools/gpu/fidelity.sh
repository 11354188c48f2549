#!/usr/bin/env bash
# Issue 5 on the H200 (sm_90): model NLL under Rowmax-H15 through the real FA4 kernels, and its simulation.
# SmolLM2-135M-Instruct Q4_1 (Llama-type, 30 layers, 9 query / 3 KV heads, head dim 64) on the Austen novels,
# 97 aligned blocks of 2048 tokens, BF16, 5,000 paired block-bootstrap replicates (seed 0):
#   1. --path kernel: stock FA4 (A0) against the Rowmax-H15 patch (A1), each variant in its own worker process;
#      sm_90 FA4 rescales whenever the running max grows, so the matching simulation threshold is tau = 0;
#   2. --path sim on the GPU, same blocks: exact softmax against the simulation of A1 (sim:rowmax-h15), the
#      simulation with exact exp2 (tiling and BF16 storage alone) and the offline whole-row Rowmax-H15.
#   Compare (1) with (2) as in paper B.2 (measured kernel vs simulation); both record the token signature, which
#   should equal the CPU sessions' (68779423a78a... for SmolLM2 on Austen, 97 x 2048).
# Prerequisites, in the same host lease: the FA4 runtime (`. /tmp/gpu-site/env.sh`, see ../shared/gpu/README.md)
# and the staged model and text (`. /tmp/softbench-model/env.sh`, see tools/stage_model.sh).
# Run from the project root: bash tools/gpu/fidelity.sh [SESSIONS_DIR]. Sessions go to ${1:-sessions}; when $OUT is
# set they are also packed into $OUT/fidelity-sessions.tgz (a call brings back at most 8 files).
# Expected runtime: about 4-6 minutes (not yet measured: two FA4 workers, each ~9 s import, GGUF dequantization and
# one compile, then 97 blocks of two 2048-token forwards; the sim run is 97 blocks x 4 conditions).
. "$(dirname "$0")/fidelity_common.sh"  # OUTDIR, common, sb, status
sb env --record --out "$OUTDIR" > /dev/null || status=1
sb fidelity "${common[@]}" --path kernel --operator rowmax-h15 || status=1
sb fidelity "${common[@]}" --path sim --device cuda --rescale-threshold 0 \
   --operator rowmax-h15 --operator exp2 --operator row:rowmax-h15 || status=1
# what the kernel path cannot do must be refused clearly (FP8 attention through FA4 is sm_100 only)
sb fidelity "${common[@]}" --max-blocks 1 --path kernel --dtype fp8 --operator rowmax-h15
echo "fp8 on sm_90 exit code: $? (3 expected: unsupported)"
if [ -n "${OUT:-}" ]; then
  tar czf "$OUT/fidelity-sessions.tgz" -C "$OUTDIR" $(cd "$OUTDIR" && ls -d *-fidelity-* *-env 2>/dev/null)
  echo "packed: $OUT/fidelity-sessions.tgz"
fi
exit $status
