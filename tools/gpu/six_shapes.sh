#!/usr/bin/env bash
# Issue 15, prepared 2026-12-03 11:35 without a GPU: the six shapes under the defaults (nothing named), at
# equal clock against FA3 with the A/A null, each dtype's Rowmax-H15 form beside A0 (h15-folded at FP8, h15-sat at
# BF16): where A0 / FA3 stands at every shape of deliverable 1 with the code as it is now (the masked tiles' one
# comparison per score, 2026-12-03 08:00, changed every causal loop).
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/six_shapes.sh 1`
set -uo pipefail
STEP=${1:?step 1}
PAYLOAD=
. tools/gpu/lease_step.sh
case "$STEP" in
1) for form in fp8_folded bf16_sat; do
     declare -n args=$form
     sb latency "${against_fa3[@]}" "${args[@]}" --seq 8192
     sb latency "${against_fa3[@]}" "${args[@]}" --seq 8192 --no-causal
     sb latency "${against_fa3[@]}" "${args[@]}" --seq 16384
   done ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "step$STEP"
