#!/usr/bin/env bash
# Issue 15, prepared 2026-12-05 20:40 (no device was lent in that session: not run); sealed first:
# sealed/grid-dependency.yaml. h15-folded's call is two kernels, the key norms' (triton_attn._key_norm_max) and the
# forward; the norms cost it 2-2.6% of every call at 8K (docs/hopper-notes.md, the key-norm kernel), more than the
# ~4 us (FP8) to ~8 us (BF16) it takes to read K once. -gdc launches the forward with programmatic dependent launch:
# the norms' programs let it start once they have all begun, and its consumers wait for the norms' grid
# (griddepcontrol.wait) only where they first read them, so that the forward's launch and prologue (barriers, Q and
# the first K and V tiles) run under the norms' last programs instead of after them. Cross-compiled here: the same
# key loop, registers and spills as without it, one wait per consumer warpgroup (tests/test_gluon_attn.py).
# Step 1 (either board): the FP8 default's h15-folded with and without -gdc checked bit for bit against each other
#         (gluon_probe --repeat-equal, which compares a label with its plain form) and against the simulation, then
#         at FP8 causal 8K at equal clock, 12 s each, the A/A null and FA3 in every run, alternating: h15-folded
#         under the FP8 default, then under it with -gdc (--variant-config), twice; then BF16 causal 8K the same
#         once under the 16-bit default (the BF16 form goal: -2.39% against FA3 without it, +3% asked).
# Step 2 (either board, for a lease with less than about 450 s of device time left): the same check, then FP8
#         causal 8K once without -gdc and once with it, and BF16 causal 8K with it only (its plain form has seven
#         sessions on the H200).
# Step 3 (less than about 300 s left): the check, then FP8 and BF16 causal 8K under -gdc only (the plain FP8 form
#         has ten sessions on the H200, the BF16 one seven).
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/grid_dependency.sh 1`
#          (carry .gpu/b)
set -uo pipefail
STEP=${1:?step 1, 2 or 3}
PAYLOAD=
LEASE=grid-dependency  # apart from other scripts' steps in the same lease (lease_step.sh)
board=$(nvidia-smi --query-gpu=name --format=csv,noheader | grep -o "H[0-9]00" | tr H h)  # the probe folder's name
. tools/gpu/lease_step.sh
fp8_default=gluon-n128s2-c240l24-hg8-g1-pd-rla-lmt-tb-mlf
bf16_default=gluon-n128s2-c240l24-hg4-pd-rl-ro-ltt-pm-tb-mlf-ka
# the -gdc kernel against its plain form, bit for bit, and against the simulation
check_gdc() {
  timeout 240 python3 tools/gpu/gluon_probe.py "$DIR/gluon-probe-$board-$(date -u +%Y%m%d-%H%M)-gdc" --checks-only \
    --only=fp8 --check-configs="$fp8_default-gdc" --check-variants=h15-folded --repeat-equal=3 2>&1 | tail -25
}
fp8_gdc() {
  sbt latency "${against_fa3[@]}" "${fp8_folded[@]}" --seq 8192 --causal --budget-s 12 \
    --variant-config "$fp8_default-gdc"
}
# FP8 causal 8K under the FP8 default, then the same with -gdc
fp8_pair() {
  sbt latency "${against_fa3[@]}" "${fp8_folded[@]}" --seq 8192 --causal --budget-s 12
  fp8_gdc
}
bf16_gdc() {
  sbt latency "${against_fa3[@]}" --dtype bf16 --variant h15-folded --seq 8192 --causal --budget-s 12 \
    --variant-config "$bf16_default-gdc"
}
case "$STEP" in
1) check_gdc
   fp8_pair; fp8_pair
   sbt latency "${against_fa3[@]}" --dtype bf16 --variant h15-folded --seq 8192 --causal --budget-s 12
   bf16_gdc ;;
2) check_gdc; fp8_pair; bf16_gdc ;;
3) check_gdc; fp8_gdc; bf16_gdc ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
