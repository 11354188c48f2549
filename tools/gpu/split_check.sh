#!/usr/bin/env bash
# Issue 15, prepared 2026-12-05 20:35; sealed first: sealed/split-check.yaml. The Gluon forward's producer and row
# sums moved out of gluon_attn into gluon_producer and gluon_row_sums (2026-12-05 20:20; 44 of 44 kernels give the
# same PTX, cross-compiled here). This step runs the split kernel on a GPU for the first time (each latency run's
# smoke check compares every kernel's output with the reference before it is timed), in runs that fill the thinnest
# rows of the board's goal table:
# Step 1 (either board): BF16 causal 8K noexp twice (the BF16 form goal's exponential-free ceiling: not known on
#         the H100, five sessions on the H200), FP8 causal 8K h15-folded (both defaults' row-sum forms, -ltt and
#         -lmt, and the dynamic schedule's producer), then BF16 causal 16K and FP8 non-causal 8K with h15-folded
#         as the variant (A0 against FA3 rests on two sessions there on both boards). 12 s at equal clock, the A/A
#         null and FA3 in every run, each dtype's default configuration.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/split_check.sh 1`
#          (carry .gpu/b)
set -uo pipefail
STEP=${1:?step 1}
PAYLOAD=
LEASE=split-check  # apart from other scripts' steps in the same lease (lease_step.sh)
nvidia-smi --query-gpu=name --format=csv,noheader
. tools/gpu/lease_step.sh
case "$STEP" in
1) sbt latency "${against_fa3[@]}" --dtype bf16 --variant noexp --seq 8192 --causal --budget-s 12
   sbt latency "${against_fa3[@]}" "${fp8_folded[@]}" --seq 8192 --causal --budget-s 12
   sbt latency "${against_fa3[@]}" --dtype bf16 --variant noexp --seq 8192 --causal --budget-s 12
   sbt latency "${against_fa3[@]}" --dtype bf16 --variant h15-folded --seq 16384 --causal --budget-s 12
   sbt latency "${against_fa3[@]}" "${fp8_folded[@]}" --seq 8192 --no-causal --budget-s 12 ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
