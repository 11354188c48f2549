#!/usr/bin/env bash
# Issue 15, prepared 2026-12-03 17:10-17:40 without a GPU; sealed first: sealed/fp8-a0-emulated.yaml.
# A0 at FP8 with one exp2 in 16 (-e16) or 32 (-e32) on the FMA pipe (softbench.operators.exp2_emulated) instead
# of MUFU.EX2, as FA4's sm_100 kernel does for a share of its scores: at FP8 the MUFU's rate is the tensor cores'
# (16 scores per clock and SM) and A0 waits on it, with about one issue slot per score to spare.
# Step 1: A0's outputs under both against the simulation (the probe's tolerance; the exact exp2 there), then FP8
# causal 8K at equal clock against FA3: the default, -e16, -e32 (h15-folded beside A0 in each: it does not
# change with the option, so its ratio to FA3 shows the lease's drift). Step 2: non-causal 8K and causal 16K, the
# default and -e16.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/emulate_fp8.sh 1`
#          (carry .gpu/b); step 2 while warm: `. /tmp/gpu-site/env.sh && bash tools/gpu/emulate_fp8.sh 2`
set -uo pipefail
STEP=${1:?step 1 or 2}
PAYLOAD=
. tools/gpu/lease_step.sh
default=gluon-n128s2-c240l24-hg8-g1-rla-lmt-tb
case "$STEP" in
1) timeout 150 python3 tools/gpu/gluon_probe.py "$DIR/probe-emulate-fp8" --only=fp8 --checks-only \
     --check-shapes=0,1,2,4,6 --check-configs=$default-e16,$default-e32 --check-variants=A0
   for cfg in $default $default-e16 $default-e32; do
     sb latency "${against_fa3[@]}" "${fp8_folded[@]}" --seq 8192 --triton-config $cfg
   done ;;
2) for seq in "--seq 8192 --no-causal" "--seq 16384"; do
     for cfg in $default $default-e16; do
       sb latency "${against_fa3[@]}" "${fp8_folded[@]}" $seq --triton-config $cfg
     done
   done ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "step$STEP"
