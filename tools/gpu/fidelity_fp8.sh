#!/usr/bin/env bash
# Issue 15, third goal, prepared 2026-12-05 20:55 (no device was lent in that session: not run). Model NLL through
# the FP8 forward that `softbench latency --backend triton --dtype fp8` times (on sm_90 the Gluon kernel under the FP8
# default, -rla's lazy anchor included), which the kernel path could not run before: the model stays BF16 and each
# call's Q, K and V are scaled into E4M3, one scale per tensor (softbench.kernels.fp8_scaling). SmolLM2-135M on
# Austen, the shared protocol of fidelity_common.sh at --dtype fp8: stock A0 against h15-folded, then against A1, each
# pair in its own run; then the simulation of the same operators on the same blocks with the same operands
# (--fp8-operands, which rounds P at P.V as the kernel does), with and without P rounded before the row sums too
# (--fp8-storage), to set kernel and simulation side by side.
# On this CPU the same comparison on a tiny model agrees block by block to 4e-5 nats (tests/test_fidelity_triton.py).
# Prerequisites in the same lease: `. /tmp/gpu-site/env.sh` and the staged model (`. /tmp/softbench-model/env.sh`).
# Run from the project root: bash tools/gpu/fidelity_fp8.sh [SESSIONS_DIR].
. "$(dirname "$0")/fidelity_common.sh"  # OUTDIR, common, sb, status
t0=$SECONDS
for op in rowmax-h15-folded rowmax-h15; do
  sb fidelity "${common[@]}" --dtype fp8 --path kernel --backend triton --operator "$op" || status=1
done
for storage in "" --fp8-storage; do
  sb fidelity "${common[@]}" --dtype fp8 --path sim --device cuda --fp8-operands $storage --operator sim:exp2 \
     --operator rowmax-h15-folded --operator rowmax-h15 || status=1
done
echo "FP8 fidelity through the kernel and the simulation took $((SECONDS - t0)) s"
if [ -n "${OUT:-}" ]; then
  tar czf "$OUT/fidelity-fp8-sessions.tgz" -C "$OUTDIR" $(cd "$OUTDIR" && ls -d *-fidelity-* 2>/dev/null)
  echo "packed: $OUT/fidelity-fp8-sessions.tgz"
fi
exit $status
