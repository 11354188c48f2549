#!/usr/bin/env bash
# Issue 15, third deliverable, written 2026-12-06 12:20-12:25 UTC and sealed before its first run
# (sealed/fidelity-forms-bf16.yaml). Model NLL through the BF16 forward that `softbench latency --backend triton`
# times on sm_90 (the Gluon 16-bit default): each Rowmax-H15 form against the same kernel's exact A0, one operator
# per session, SmolLM2-135M on Austen under the shared protocol of fidelity_common.sh (97 blocks of 2048). Until now
# h15-folded and the hybrids went through a kernel only in the CPU interpreter (20 blocks of 512). Fidelity does not
# depend on the board: any sm_90 GPU runs it. Two steps, each under a call's ten minutes (about 100-150 s an
# operator):
#   1  h15-folded, then A1 (a fresh A1 beside it, so that tools/analysis/operator_fidelity.py pairs the two on the
#      same blocks of the same stock kernel)
#   2  the hybrids h15-1of4 and h15-1of2 (Rowmax-H15 on one score in four, and in two; the MUFU on the rest)
#   3  (added 12:33-12:36, sealed first: sealed/fidelity-forms-bf16-kjv.yaml) the four of steps 1 and 2 on the second
#      corpus, the King James Bible (tools/kjv_text.sh's text, carried as .gpu/kjv/kjv.txt unless KJV_TEXT names it)
# Prerequisites in the same lease: the staged model (`. /tmp/softbench-model/env.sh`, tools/stage_model.sh).
# Run from the project root: bash tools/gpu/fidelity_forms_bf16.sh STEP [SESSIONS_DIR].
STEP=${1:?usage: fidelity_forms_bf16.sh STEP [SESSIONS_DIR] (STEP 1, 2 or 3)}
shift
. "$(dirname "$0")/fidelity_common.sh"  # OUTDIR, common, sb, status
case "$STEP" in
  1) operators=(rowmax-h15-folded rowmax-h15) ;;
  2) operators=(rowmax-h15-1of4 rowmax-h15-1of2) ;;
  3) operators=(rowmax-h15-folded rowmax-h15 rowmax-h15-1of4 rowmax-h15-1of2)
     kjv=${KJV_TEXT:-.gpu/kjv/kjv.txt}
     [ -f "$kjv" ] || { echo "no KJV text at $kjv (bash tools/kjv_text.sh $kjv, then carry it)" >&2; exit 2; }
     for i in "${!common[@]}"; do [ "${common[$i]}" = --corpus ] && common[i + 1]=$kjv; done ;;
  *) echo "STEP must be 1, 2 or 3" >&2; exit 2 ;;
esac
t0=$SECONDS
pack() {  # after every operator: a call cut short at its limit still brings back the sessions it finished
  [ -n "${OUT:-}" ] || return 0
  tar czf "$OUT/fidelity-forms-bf16-$STEP.tgz" -C "$OUTDIR" $(cd "$OUTDIR" && ls -d *-fidelity-* 2>/dev/null)
  echo "packed: $OUT/fidelity-forms-bf16-$STEP.tgz"
}
for op in "${operators[@]}"; do
  sb fidelity "${common[@]}" --path kernel --backend triton --operator "$op" || status=1
  pack
done
echo "step $STEP: ${operators[*]} through the BF16 kernel took $((SECONDS - t0)) s"
exit $status
