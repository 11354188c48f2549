#!/usr/bin/env bash
# Issue 15, prepared 2026-12-04 11:10 after key_norm_trace.sh (lease 10:37-10:39); sealed first:
# sealed/folded-clamped.yaml.
# h15-folded's call runs a pass over K before the attention kernel (the key norms that prove its clamp idle):
# 9.8 us at BF16 causal 8K, 2.6% of the call, 5.5 us (2.0%) at FP8 (traces 20261204T103824Z, 103907Z), about
# all of its loss against A0 at BF16. h15-folded-clamped (new) keeps the clamp in every tile instead: one FMNMX per
# score more in the loop (523 against 459 instructions at BF16, 471 against 407 at FP8, sm_90a cross-compile), no
# pass. h15-sat, whose loop is as long at BF16 (521), reads 0.91 of A0 there.
# Step 1: its outputs against plain() and the simulation under both defaults, its gates at BF16 causal, then
# 12 s equal-clock screens beside A0, the A/A null and FA3 at BF16 and FP8 causal 8K under the defaults.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/folded_clamped.sh 1`
#          (carry .gpu/b)
set -uo pipefail
STEP=${1:?step 1}
PAYLOAD=
LEASE=folded-clamped  # apart from other scripts' steps in the same lease (lease_step.sh)
. tools/gpu/lease_step.sh
clamped=(--variant h15-folded-clamped)
case "$STEP" in
1) timeout 200 python3 tools/gpu/gluon_probe.py "$DIR/probe-folded-clamped" --only=bf16,fp8 --checks-only \
     --check-shapes=0,2,4 --check-variants=A0,h15-folded-clamped
   sb gates --backend triton --causal --dtype bf16 "${clamped[@]}"
   sb latency "${against_fa3[@]}" --dtype bf16 "${clamped[@]}" --seq 8192 --budget-s 12
   sb latency "${against_fa3[@]}" --dtype fp8 "${clamped[@]}" --seq 8192 --budget-s 12 ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
