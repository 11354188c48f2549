#!/usr/bin/env bash
# Written 2026-12-07 08:50, before it ran (run 08:53-09:01 on an H100 that came for nvidia-h200, docs/leases.md).
# `softbench energy` last ran on a GPU on 2026-11-30 (19:23), `sweep` on
# 2026-12-02 and `trace` on 2026-12-04; since then their options, protocols, NVML reading and bad-input handling
# changed (EnergyProtocol and the settle step, NVML by the device's UUID, the bounds of durations and counts).
# This step runs each on a GPU at today's code, in the forms a user would type first:
#   env --record; the design card's `energy --seconds 45` as written (FA4, each dtype's default: BF16 on sm_90);
#   energy through the Gluon kernel at FP8 causal 8K with h15-folded (the form's energy per forward, 20 s loops);
#   trace run through the Gluon kernel at FP8 causal 8K (A0, h15-folded) and FA4's default (A0, A1 at BF16 8K);
#   sweep variants through the Gluon kernel at FP8 causal 8K (A1, h15-folded, noexp against A0, null and FA3).
# Each session's numbers are its own; the sweep's are at equal clock, the energy sessions' sustained.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/commands_check.sh 1`
#          (carry .gpu/b)
set -uo pipefail
STEP=${1:?step 1}
PAYLOAD=
LEASE=commands-check  # apart from other scripts' steps in the same lease (lease_step.sh)
nvidia-smi --query-gpu=name,uuid --format=csv,noheader
. tools/gpu/lease_step.sh
case "$STEP" in
# energy's loops outlast sbt's 150 s limit; a kernel that hangs is caught by 300 s
1) sb env --record
   sb_within 300 energy --seconds 45
   sb_within 300 energy --backend triton --dtype fp8 --seq 8192 --causal --order A0,h15-folded,h15-folded,A0 --seconds 20
   sbt trace run --backend triton --dtype fp8 --seq 8192 --causal --variants A0,h15-folded
   sbt trace run --seq 8192
   sbt sweep variants --backend triton --dtype fp8 --seq 8192 --causal --variants A1,h15-folded,noexp \
     --reference fa3 --budget-s 12 ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
