#!/usr/bin/env bash
# Issue 15, 2026-12-06 05:37. Written down after it ran: the lease of 05:37-05:41 (an H100 that came for
# nvidia-h200, with 263 s of device time left) ran these lines inline, as the call's command. Two BF16 causal 8K
# noexp runs against FA3 with the null, 12 s at equal clock under the 16-bit default: the exponential-free ceiling
# of the BF16 form goal on the H100, in the scope of sealed/split-check.yaml's S1 and S2 (re-sealed at 04:19, window
# to 07:10; the sealed step itself, split_check.sh 1, takes about 240 s).
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/bf16_ceiling.sh 1`
#          (carry .gpu/b)
set -uo pipefail
STEP=${1:?step 1}
PAYLOAD=
LEASE=bf16-ceiling  # apart from other scripts' steps in the same lease (lease_step.sh)
. tools/gpu/lease_step.sh
case "$STEP" in
1) for _ in 1 2; do
     sbt latency "${against_fa3[@]}" --dtype bf16 --variant noexp --seq 8192 --causal --budget-s 12
   done ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
