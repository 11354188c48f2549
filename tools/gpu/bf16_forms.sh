#!/usr/bin/env bash
# Issue 15, prepared 2026-12-04 21:40; sealed first: sealed/bf16-forms.yaml. Under -ka (the 16-bit default since
# 17:40) noexp is level with A0 at BF16 causal 8K (20261204T194842Z, 195200Z): the exponential is off the critical
# path there. h15-folded pays its key-norm pass (2.6% of the call at 8K, 20261204T103824Z) and reads -2.37% against
# FA3 across six sessions; h15-folded-clamped (no pass, one FMNMX per score more) and h15-sat were last timed before
# -ka (0.980 and about 0.95 of FA3). If the loop's extra instructions are off the critical path as the exponential
# is, the clamped form reads at about A0's speed: the best correct BF16 Rowmax-H15 form under the default.
# Step 1: h15-folded-clamped's gates at BF16 causal under the default, then against FA3 at equal clock, 30 s with two
#         processes per kernel: causal 8K (h15-folded-clamped, then h15-sat), causal 16K (h15-folded-clamped).
# Step 2 (added after step 1, no seal): step 1 read h15-folded-clamped -2.5% and h15-sat -7.0% against A0 at
#         causal 8K, where noexp is level with A0: the loop's added instructions are on the critical path although
#         the exponential is not. Nsight Compute (pipes, issue, warp stalls, per-instruction samples) of A0, noexp
#         and h15-folded-clamped at BF16 causal 8K under the default.
# Step 3 (added after 1-2; sealed/bf16-16k-parity.yaml): issue 15's first goal at its weakest shape. A0 against FA3
#         at BF16 causal 16K under the default read +0.21% [-0.19, +0.60] across six sessions (20:10), its interval
#         holding 0: more sessions, 30 s with two processes per kernel, noexp as the variant, which also repeats
#         the exponential-free ceiling at 16K (+1.72% over A0 in one session, 20261204T195309Z). Sealed for five;
#         cut to three before it ran, when a failed start left 518 s of device time, so that step 4 fits.
# Step 4 (added with step 3's cut; sealed/bf16-nc8k-parity.yaml): the same goal at BF16 non-causal 8K, where two
#         sessions give +3.19% [-3.75, +10.12] across sessions (tools/analysis/goal_status.py): three sessions of
#         12 s, noexp as the variant.
# Step 5 (prepared 2026-12-04 22:00 without a device; sealed/bf16-two-programs-now.yaml): two one-consumer programs
#         per SM at BF16 under today's 16-bit options (gluon-n64s2-c240l24-hg4-g1-pd-rl-ro-ltt-pm-tb-mlf-ka: 64-key
#         tiles, 98,716 bytes of shared memory per program, 128 registers, no spills; its unmasked key loop 300
#         instructions per 32 keys, 315 under the options of 2026-12-03, n128's 452 per 64). Two programs reach their block
#         boundaries independently, which one program of two consumers cannot (the boundary idles the tensor core
#         about 2.3 tiles per block). Checks against the one-block kernel first; then 12 s against FA3 at causal 8K,
#         causal 16K and non-causal 8K, noexp as the variant (its ceiling in the same run).
# Step 6 (prepared 2026-12-04 22:50 without a device; sealed/bf16-8k-ceiling.yaml): the exponential-free ceiling
#         beside the BF16 form goal (1.03 of FA3 at causal 8K). tools/analysis/goal_status.py sets the goal
#         beside noexp against FA3 under the default: +0.55% across two sessions (+0.29%, +0.82%), whose t
#         interval on one degree of freedom, [-2.84, +3.94], still holds the goal. Three more sessions of 30 s
#         with two processes per kernel, noexp as the variant, say whether any form of the weights can reach it.
# Steps 3, 4 and 6 ran 2026-12-05 01:31-01:35 and 02:10-02:13, step 5 at 03:00-03:03 (docs/leases.md, "The leases of
#         2026-12-05"): A0 at or above FA3 at every BF16 shape; the ceiling under the form goal; two programs per SM
#         0.91 of FA3.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/bf16_forms.sh 1`
#          (carry .gpu/b)
set -uo pipefail
STEP=${1:?step 1 to 6}
PAYLOAD=
LEASE=bf16-forms  # apart from other scripts' steps in the same lease (lease_step.sh)
. tools/gpu/lease_step.sh
clamped=(--dtype bf16 --variant h15-folded-clamped)
case "$STEP" in
1) sb gates --backend triton --causal "${clamped[@]}"
   sbt latency "${against_fa3[@]}" "${clamped[@]}" --seq 8192 --processes 2
   sbt latency "${against_fa3[@]}" "${bf16_sat[@]}" --seq 8192 --processes 2
   sbt latency "${against_fa3[@]}" "${clamped[@]}" --seq 16384 --processes 2 ;;
2) timeout 300 python3 -m softbench audit --backend triton --dtype bf16 --causal --seq 8192 \
     --variants A0,noexp,h15-folded-clamped --source-stalls --out "$DIR" 2>&1 | grep -v "━" | tail -60 ;;
3) for _ in 1 2 3; do
     sbt latency "${against_fa3[@]}" --dtype bf16 --variant noexp --seq 16384 --processes 2
   done ;;
4) for _ in 1 2 3; do
     sbt latency "${against_fa3[@]}" --dtype bf16 --variant noexp --seq 8192 --no-causal --budget-s 12
   done ;;
5) n64=gluon-n64s2-c240l24-hg4-g1-pd-rl-ro-ltt-pm-tb-mlf-ka
   timeout 200 python3 tools/gpu/gluon_probe.py "$DIR/probe-bf16" --only=bf16 --checks-only \
     --check-shapes=0,2,3,5,6 --check-configs=$n64 --check-variants=A0,h15-folded --repeat-equal=2 \
     && touch "$DIR/checks-passed" \
     && for shape in "--seq 8192" "--seq 16384" "--seq 8192 --no-causal"; do
       sbt latency "${against_fa3[@]}" --dtype bf16 --variant noexp $shape --budget-s 12 --triton-config $n64
     done ;;
6) for _ in 1 2 3; do
     sbt latency "${against_fa3[@]}" --dtype bf16 --variant noexp --seq 8192 --processes 2
   done ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
