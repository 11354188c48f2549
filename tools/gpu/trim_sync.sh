#!/usr/bin/env bash
# Issue 15: the Gluon kernel with the warpgroup barriers before its mbarrier waits and releases taken out of the
# PTX (-tb, softbench.kernels.ptx_trim), checked bit for bit against the same kernel with them, then timed against
# FA3 in the same interleavings at the six shapes (A0 / FA3 and the best Rowmax-H15 form / FA3 at equal
# clock; FP8 causal 8K also sustained), the plain kernel beside it at FP8 and BF16 causal 8K.
#   here:  sessions/ moved out of the checkout for the lease (it is larger than one call carries)
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then, back to back,
#          `bash .gpu/b/install.sh && . /tmp/gpu-site/env.sh && bash tools/gpu/trim_sync.sh N` (carry .gpu/b),
#          N = 1, 2, 3; the second lease `bash .gpu/a/install.sh`, then the same with N = 4; the third with N = 5
# Ran: lease 1 (05:27-05:41 UTC) calls a, b+1, 2, 3 (853 s of device time); lease 2 (05:45-05:55) calls a, b+4
# (586 s); lease 3 (06:13-06:16) calls a, b+5 (92 s). Every step ran whole; all checks passed.
set -uo pipefail
STEP=${1:?step 1..3}
PAYLOAD=
. tools/gpu/lease_step.sh
FP8_TB=gluon-n128s2-c240l24-hg8-g1-tb
FP8_PLAIN=gluon-n128s2-c240l24-hg8-g1
BF16_TB=gluon-n128s2-c240l24-hg8-tb
BF16_PLAIN=gluon-n128s2-c240l24-hg8
common=(--backend triton --null --reference fa3 --start-order shuffled)
tb_ok() { [ -f /tmp/sb/tb-ok ]; }
case "$STEP" in
1) sb env --record
   # -tb against the same kernel with the barriers: the small ragged shapes, then 20 runs each at 8K (causal and
   # not), every output equal bit for bit
   if timeout 200 python3 tools/gpu/gluon_probe.py /tmp/sb/probe-tb-fp8 --only=fp8 --checks-only --check-shapes=0,1,2 \
        --check-configs=$FP8_TB --check-variants=A0,h15-folded,h15-sat --repeat-equal=20 \
      && timeout 200 python3 tools/gpu/gluon_probe.py /tmp/sb/probe-tb-bf16 --only=bf16 --checks-only \
        --check-shapes=0,2,3 --check-configs=$BF16_TB --check-variants=A0,h15-sat --repeat-equal=20; then
     touch /tmp/sb/tb-ok
   else echo "tb probe failed: no -tb timing follows"; fi
   cp -r /tmp/sb/probe-tb-* "$DIR/" 2>/dev/null
   tb_ok && sb sweep variants "${common[@]}" --dtype fp8 --seq 8192 --baseline A0 --variants h15-folded,h15-sat \
     --triton-config $FP8_TB
   sb sweep variants "${common[@]}" --dtype fp8 --seq 8192 --baseline A0 --variants h15-folded,h15-sat \
     --triton-config $FP8_PLAIN ;;
2) tb_ok && sb sweep variants "${common[@]}" --dtype bf16 --seq 8192 --baseline A0 --variants h15-sat,h15-folded \
     --triton-config $BF16_TB
   sb sweep variants "${common[@]}" --dtype bf16 --seq 8192 --baseline A0 --variants h15-sat,h15-folded \
     --triton-config $BF16_PLAIN
   tb_ok && sb latency "${common[@]}" --dtype fp8 --seq 16384 --variant h15-folded --triton-config $FP8_TB
   tb_ok && sb latency "${common[@]}" --dtype fp8 --no-causal --seq 8192 --variant h15-folded --triton-config $FP8_TB ;;
3) tb_ok && sb latency "${common[@]}" --dtype bf16 --seq 16384 --variant h15-sat --triton-config $BF16_TB
   tb_ok && sb latency "${common[@]}" --dtype bf16 --no-causal --seq 8192 --variant h15-sat --triton-config $BF16_TB
   tb_ok && sb latency "${common[@]}" --dtype fp8 --seq 8192 --variant h15-folded --protocol sustained \
     --triton-config $FP8_TB ;;
4) # the second lease (fresh host: calls a and b again): configurations around -tb screened against FA3, each a
   # short interleaving (12 s) with its null; -ppn-tb and s3-tb first checked bit for bit against their plain forms
   timeout 200 python3 tools/gpu/gluon_probe.py /tmp/sb/probe-tb2-bf16 --only=bf16 --checks-only --check-shapes=0,2 \
     --check-configs=gluon-n128s2-c240l24-hg8-ppn-tb,gluon-n128s3-c240l24-hg8-tb --check-variants=A0,h15-sat \
     --repeat-equal=5 && touch /tmp/sb/tb2-ok
   cp -r /tmp/sb/probe-tb2-* "$DIR/" 2>/dev/null
   short=("${common[@]}" --budget-s 12)
   for cfg in gluon-n128s2-c240l24-hg8-tb gluon-n128s2-c240l24-hg8-ppn-tb gluon-n128s3-c240l24-hg8-tb; do
     [ "$cfg" = $BF16_TB ] || [ -f /tmp/sb/tb2-ok ] || continue
     sb latency "${short[@]}" --dtype bf16 --seq 8192 --variant h15-sat --triton-config $cfg
   done
   for cfg in gluon-n128s2-c240l24-hg4-tb $BF16_TB; do
     sb latency "${short[@]}" --dtype bf16 --seq 16384 --variant h15-sat --triton-config $cfg
   done
   for cfg in $FP8_TB gluon-n128s2-c240l24-hg16-g1-tb gluon-n128s2-c240l24-hg8-ppn-tb; do
     sb latency "${short[@]}" --dtype fp8 --seq 8192 --variant h15-folded --triton-config $cfg
   done ;;
5) # the third lease (fresh host): the native audit of softbench's kernels, first GPU run, with FA3 beside them:
   # counters and warp stalls of one launch each (time-boxed so that what it wrote is packed)
   timeout 170 python3 -m softbench audit --backend triton --dtype fp8 --seq 8192 --causal --variants A0,h15-folded \
     --reference fa3 --out "$DIR" 2>&1 | grep -v "━" ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "step$STEP"
