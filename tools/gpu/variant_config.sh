#!/usr/bin/env bash
# Issue 15, prepared 2026-12-04 09:25; sealed first: sealed/variant-config.yaml. The fastest correct Rowmax-H15 form
# at FP8 causal 8K runs two consumers under hg2 (h15-folded 1.150 of FA3 at equal clock, 085610Z; 1.153 sustained,
# 090501Z), where A0 is 5-6 points slower than under the FP8 default (one consumer, hg8). latency --variant-config
# times both in one run: A0 (and its null) under the default, h15-folded under two consumers, FA3 beside them.
# Step 1: at equal clock (30 s), then sustained at the power cap.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/variant_config.sh 1`
#          (carry .gpu/b)
set -uo pipefail
STEP=${1:?step 1}
PAYLOAD=
LEASE=variant-config  # apart from other scripts' steps in the same lease (lease_step.sh)
. tools/gpu/lease_step.sh
two_hg2=gluon-n128s2-c240l24-hg2-pd-rla-lmt-tb-mlf
case "$STEP" in
1) sb latency "${against_fa3[@]}" "${fp8_folded[@]}" --seq 8192 --variant-config $two_hg2
   sb latency --backend triton --null --reference fa3 "${fp8_folded[@]}" --seq 8192 --protocol sustained \
     --variant-config $two_hg2 ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
