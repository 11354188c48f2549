#!/usr/bin/env bash
# Issue 7: model NLL through the kernel that `softbench latency --backend triton` times on the H200 (the Gluon
# kernel at BF16, head dim 64 here), SmolLM2-135M-Instruct Q4_1 on Austen, 97 x 2048 tokens, 5000 paired block
# bootstrap replicates: stock A0 against A1 (Rowmax-H15), then against h15-sat (the clamp as the scaling FMA's
# saturation), each pair in its own run (the kernel path pairs the stock kernel with one variant); then the
# simulation of both on the same blocks (sim path on the GPU, tau = 0), to compare kernel and simulation.
# Prerequisites in the same lease: `. /tmp/gpu-site/env.sh` and the staged model (`. /tmp/softbench-model/env.sh`,
# the parts' reassemble.sh). Run from the project root: bash tools/gpu/fidelity_gluon.sh [SESSIONS_DIR].
. "$(dirname "$0")/fidelity_common.sh"  # OUTDIR, common, sb, status
t0=$SECONDS
for op in rowmax-h15 rowmax-h15-sat; do
  sb fidelity "${common[@]}" --path kernel --backend triton --operator "$op" || status=1
done
sb fidelity "${common[@]}" --path sim --device cuda --rescale-threshold 0 --operator rowmax-h15 \
   --operator rowmax-h15-sat || status=1
echo "fidelity through the Gluon kernel took $((SECONDS - t0)) s"
if [ -n "${OUT:-}" ]; then
  tar czf "$OUT/fidelity-gluon-sessions.tgz" -C "$OUTDIR" $(cd "$OUTDIR" && ls -d *-fidelity-* 2>/dev/null)
  echo "packed: $OUT/fidelity-gluon-sessions.tgz"
fi
exit $status
