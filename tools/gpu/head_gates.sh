#!/usr/bin/env bash
# Written 2026-12-07 07:28, before it ran (run 07:32-07:37 on an H100 that came for nvidia-h200, docs/leases.md).
# Since the last GPU lease (2026-12-06 13:28) the gates' read-back changed: softbench.kernels.sim's
# probabilities_via_one_hot steps through the keys by V's head dim (commit c8a9a7a; a block
# larger than dv used to skip keys, and no caller passed one). This step runs `softbench gates` on a GPU at that
# code: the Gluon kernel at each dtype's default, at FP8 for A1, h15-folded and h15-sat, causal and non-causal, at
# BF16 causal for those three and the hybrid h15-1of4; then the design card's own command with its three rounds.
# Each gate's verdict is the session's own; nothing here is a timed claim beyond the design card's latency session.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/head_gates.sh 1`
#          (carry .gpu/b)
set -uo pipefail
STEP=${1:?step 1}
PAYLOAD=
LEASE=head-gates  # apart from other scripts' steps in the same lease (lease_step.sh)
nvidia-smi --query-gpu=name,uuid --format=csv,noheader
. tools/gpu/lease_step.sh
case "$STEP" in
1) for v in A1 h15-folded h15-sat; do
     for c in --causal --no-causal; do
       sbt gates --backend triton --variant "$v" --dtype fp8 "$c"
     done
   done
   for v in A1 h15-folded h15-sat h15-1of4; do
     sbt gates --backend triton --variant "$v" --dtype bf16 --causal
   done
   sbt latency --dtype fp8 --seq 16384 --rounds 3 ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
