#!/usr/bin/env bash
# Issue 15, two schedules of the Gluon loop's softmax that change no output bit, after the per-instruction stall
# samples (tools/gpu/stalls.sh 2, 2026-12-02): the row maximum as two chains of 31 dependent FMNMX ahead of every
# exponential, then the tile's 64 MUFU.EX2 back to back, where FA3's loop spreads them among other work.
#   -mt: each row's maximum reduced as a tree (GluonConfig.row_max "tree");
#   -pw: the previous tile's P.V waited for between the two column halves of the weights (GluonConfig.pv_wait).
#   step 1: both checked bit for bit against the plain kernel (small shapes, 3 runs at 8K); then, only if they
#           pass, FP8 causal 8K under -tb (the default), -mt-tb and -mt-pw-tb, each an interleaved latency session
#           with its A/A null and FA3;
#   step 2: the same three at BF16 causal 8K;
#   step 3: CONFIG_FP8 and CONFIG_BF16 (the faster of step 1's and 2's, given on the command line) at the other four
#           shapes of issue 15, and FP8 causal 8K sustained at the power cap.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then, back to back,
#          `bash .gpu/b/install.sh && . /tmp/gpu-site/env.sh && bash tools/gpu/row_max.sh 1` (carry .gpu/b), and
#          `. /tmp/gpu-site/env.sh && bash tools/gpu/row_max.sh N [...]` for N = 2, 3 while the host is still held
# Ran 2026-12-02 07:41-07:52 from the source under the tag src-b7d7098d (lost since: the repository was recreated
# from its landed commits without tags), the only one with -mt and -pw: neither
# schedule was faster, and main keeps neither. Step 1's first call passed its checks but its sessions were refused
# (the backend's option list lacked the two new fields); after that fix its timing ran again with the checks skipped
# (their record is sessions/gluon-probe-h200-20261202-0742-schedules-*). Step 2 ran; step 3 did not (no
# configuration to carry to the other shapes). Sessions 20261202T074558Z-075120Z.
set -uo pipefail
STEP=${1:?step 1..3}
PAYLOAD=
. tools/gpu/lease_step.sh
FP8=gluon-n128s2-c240l24-hg8-g1
BF16=gluon-n128s2-c240l24-hg8
common=(--backend triton --null --reference fa3 --start-order shuffled)
checked() { [ -f /tmp/sb/schedules-ok ]; }
case "$STEP" in
1) ok=1
   timeout 170 python3 tools/gpu/gluon_probe.py "$DIR/probe-schedules-fp8" --only=fp8 --checks-only \
     --check-shapes=0,2 --check-configs=$FP8-mt-tb,$FP8-mt-pw-tb --check-variants=A0,h15-folded --repeat-equal=3 \
     || ok=0
   timeout 170 python3 tools/gpu/gluon_probe.py "$DIR/probe-schedules-bf16" --only=bf16 --checks-only \
     --check-shapes=0,2,3 --check-configs=$BF16-mt-tb,$BF16-mt-pw-tb --check-variants=A0,h15-sat --repeat-equal=3 \
     || ok=0
   [ $ok = 1 ] && touch /tmp/sb/schedules-ok || echo "schedule probe failed: no timing follows"
   for cfg in $FP8-mt-tb $FP8-tb $FP8-mt-pw-tb; do
     checked && sb latency "${common[@]}" --dtype fp8 --seq 8192 --variant h15-folded --triton-config $cfg
   done ;;
2) for cfg in $BF16-mt-pw-tb $BF16-tb $BF16-mt-tb; do
     checked && sb latency "${common[@]}" --dtype bf16 --seq 8192 --variant h15-sat --triton-config $cfg
   done ;;
3) CONFIG_FP8=${2:?FP8 configuration} CONFIG_BF16=${3:?BF16 configuration}
   sb latency "${common[@]}" --dtype fp8 --seq 16384 --variant h15-folded --triton-config $CONFIG_FP8
   sb latency "${common[@]}" --dtype fp8 --no-causal --seq 8192 --variant h15-folded --triton-config $CONFIG_FP8
   sb latency "${common[@]}" --dtype bf16 --seq 16384 --variant h15-sat --triton-config $CONFIG_BF16
   sb latency "${common[@]}" --dtype bf16 --no-causal --seq 8192 --variant h15-sat --triton-config $CONFIG_BF16
   sb latency "${common[@]}" --dtype fp8 --seq 8192 --variant h15-folded --protocol sustained \
     --triton-config $CONFIG_FP8 ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "step$STEP"
