#!/usr/bin/env bash
# Issue 15, prepared 2026-12-03 17:25-17:50 without a GPU; sealed first: sealed/bf16-split-qk.yaml.
# The split Q.K^T (-sq, 16 bits): each key tile's Q.K^T as two wgmma groups of 64 keys, the first half weighed
# while the second is still in the tensor core. Step 1: its outputs against the simulation (A0 and h15-sat, under
# hg8 and hg2; the probe's tolerance: the running maximum moves at half-tile steps here), then BF16 causal 8K
# against FA3 with h15-sat, the default beside it in the same lease; then noexp under -sq (the ceiling there).
# Run 2026-12-03 17:43-17:47: slower (A0 0.910 against 0.926, noexp 0.978 against 1.027), and h15-sat missed its
# simulation by 3% (its weights leave the lattice); -sq now refuses the Rowmax-H15 forms.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/split_qk.sh 1`
set -uo pipefail
STEP=${1:?step 1}
PAYLOAD=
. tools/gpu/lease_step.sh
split=gluon-n128s2-c240l24-hg8-rl-ltt-tb-sq
case "$STEP" in
1) timeout 150 python3 tools/gpu/gluon_probe.py "$DIR/probe-split-bf16" --only=bf16 --checks-only \
     --check-shapes=0,2,4 --check-configs=$split,gluon-n128s2-c240l24-hg2-rl-ltt-tb-sq --check-variants=A0,h15-sat
   sb latency "${against_fa3[@]}" "${bf16_sat[@]}" --seq 8192 --triton-config $split
   sb latency "${against_fa3[@]}" "${bf16_sat[@]}" --seq 8192
   sb latency "${against_fa3[@]}" --dtype bf16 --variant noexp --seq 8192 --budget-s 12 --triton-config $split ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "step$STEP"
