#!/usr/bin/env bash
# Issue 15, prepared 2026-12-04 04:45 without a GPU, for the next lease; sealed first: sealed/fp8-ro.yaml.
# O's rescale beside the next Q.K^T (-ro) under the FP8 default's -mlf: in a 12 s screen (20261204T040533Z) A0 read
# what it reads under the default (1.022 of FA3 against 1.027) and h15-folded 1.095 of FA3 against the default's
# 1.072. At FP8 -ro puts its 64 FMULs between Q.K^T's issue and P.V's (loop_fmul_among_gmma 64, 404 loop
# instructions against 406, sm_90a cross-compile); 2026-12-02's one-loop kernel lost A0 2-5 points to it.
# Step 1: -ro under -mlf checked bit for bit against the plain kernel (FP8, A0 and h15-folded; it was checked in the
# one-loop kernel only), then the three FP8 shapes for 30 s under -g1-rla-ro-lmt-tb-mlf, and causal 8K under two
# consumers hg2 in one loop with -ro (h15-folded's best form, 1.097-1.106 of FA3 without -ro).
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/fp8_ro.sh 1` (carry .gpu/b)
set -uo pipefail
STEP=${1:?step 1}
PAYLOAD=
LEASE=fp8-ro  # apart from other scripts' steps in the same lease (lease_step.sh)
. tools/gpu/lease_step.sh
g1_ro=gluon-n128s2-c240l24-hg8-g1-rla-ro-lmt-tb-mlf
hg2_ro=gluon-n128s2-c240l24-hg2-rla-ro-lmt-tb
case "$STEP" in
1) timeout 150 python3 tools/gpu/gluon_probe.py "$DIR/probe-fp8-ro" --only=fp8 --checks-only \
     --check-shapes=0,1,4,5 --check-configs=$g1_ro,$hg2_ro --check-variants=A0,h15-folded
   for seq in "--seq 8192" "--seq 8192 --no-causal" "--seq 16384"; do
     sb latency "${against_fa3[@]}" "${fp8_folded[@]}" $seq --triton-config $g1_ro
   done
   sb latency "${against_fa3[@]}" "${fp8_folded[@]}" --seq 8192 --triton-config $hg2_ro ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
