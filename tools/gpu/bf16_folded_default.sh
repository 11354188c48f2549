#!/usr/bin/env bash
# Issue 15, prepared 2026-12-04 10:15 after bf16_16k.sh (lease 10:00-10:06); sealed first:
# sealed/bf16-folded-default.yaml.
# BF16 Rowmax-H15 under the 16-bit default as it is now (hg4-pd-rl-ro-ltt-pm-tb-mlf). Only h15-sat has been timed
# under it (0.87-0.93 of FA3): -ro and -pm gave A0 four points and h15-sat none. h15-folded, whose loop is A0's
# with a shift per score where A0 has MUFU.EX2 (459 against 452 instructions, sm_90a cross-compile, 2026-12-04),
# has not run under -ro, -pm, -pd or -mlf; under -rl (the default's exact anchor) its gates passed on 2026-12-03.
# Step 1: its outputs against plain() and the simulation, its gates causal and not, then equal-clock runs beside A0,
# the A/A null and FA3: causal 8K (30 s), causal 16K with two processes per kernel (30 s), non-causal 8K (12 s).
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/bf16_folded_default.sh 1`
#          (carry .gpu/b)
set -uo pipefail
STEP=${1:?step 1}
PAYLOAD=
LEASE=bf16-folded-default  # apart from other scripts' steps in the same lease (lease_step.sh)
. tools/gpu/lease_step.sh
bf16_default=gluon-n128s2-c240l24-hg4-pd-rl-ro-ltt-pm-tb-mlf
bf16_folded=(--dtype bf16 --variant h15-folded)
case "$STEP" in
1) timeout 150 python3 tools/gpu/gluon_probe.py "$DIR/probe-folded-default" --only=bf16 --checks-only \
     --check-shapes=0,2,4 --check-configs=$bf16_default --check-variants=A0,h15-folded
   sb gates --backend triton --causal "${bf16_folded[@]}"
   sb gates --backend triton --no-causal "${bf16_folded[@]}"
   sb latency "${against_fa3[@]}" "${bf16_folded[@]}" --seq 8192
   sb latency "${against_fa3[@]}" "${bf16_folded[@]}" --seq 16384 --processes 2
   sb latency "${against_fa3[@]}" "${bf16_folded[@]}" --seq 8192 --no-causal --budget-s 12 ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
