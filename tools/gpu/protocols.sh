#!/usr/bin/env bash
# Issue 14 on the H200: the interleaved and sustained protocols with the null and FlashAttention-3 in the same
# run. Part 1: three interleaved invocations each at FP8 and BF16 causal 8K (h15-sat, --null, --reference fa3)
# and the design card's FP8 16K command as written. Part 2: three sustained invocations at FP8 causal 8K.
# Usage (after `. /tmp/gpu-site/env.sh`): bash tools/gpu/protocols.sh 1|2 SESSIONS_DIR
set -uo pipefail
PART=${1:?part 1 or 2}
DIR=${2:-/tmp/softbench-sessions}
mkdir -p "$DIR"
export PYTHONUNBUFFERED=1
sb() { local t0=$SECONDS; python3 -m softbench "$@" --out "$DIR" 2>&1 | grep -v "━"; echo "wall $((SECONDS - t0)) s: softbench $*"; }
python3 -c "import fa3_fwd_interface, triton; print('fa3', fa3_fwd_interface.__file__, 'triton', triton.__version__)"
case "$PART" in
1)
  for i in 1 2 3; do
    sb latency --backend triton --dtype fp8 --seq 8192 --variant h15-sat --null --reference fa3
  done
  for i in 1 2 3; do
    sb latency --backend triton --dtype bf16 --seq 8192 --variant h15-sat --null --reference fa3
  done
  sb latency --dtype fp8 --seq 16384 --rounds 3   # the design card's command, as written
  ;;
2)
  for i in 1 2 3; do
    sb latency --backend triton --dtype fp8 --seq 8192 --variant h15-sat --null --reference fa3 --protocol sustained
  done
  ;;
esac
# Part 3 (no FA3 staged: the Triton/Gluon kernels need only the host's triton): the random order's null at FP8
if [ "$PART" = 3 ]; then
  for i in 1 2; do
    sb latency --backend triton --dtype fp8 --seq 8192 --variant h15-sat --null --reference none --budget-s 20
  done
fi
# Part 4 (Triton/Gluon only): window length against the power controller's oscillation. At 100 calls (36 ms) the
# SM clock moves 1530-1935 MHz between consecutive windows; shorter windows put the kernels of a cycle closer in
# time. FP8 causal 8K h15-sat with the null at 10, 20 and 40 calls per window, and BF16 at 20.
if [ "$PART" = 4 ]; then
  for c in 10 20 40; do
    sb latency --backend triton --dtype fp8 --seq 8192 --variant h15-sat --null --reference none --calls "$c"
  done
  sb latency --backend triton --dtype bf16 --seq 8192 --variant h15-sat --null --reference none --calls 20
fi
# Part 5 (FA3 staged): the goals of issue 14 under the windows sized in time (8 ms): three interleaved invocations
# each at FP8 and BF16 causal 8K with the null and FA3, then the design card's FP8 16K command as written.
if [ "$PART" = 5 ]; then
  for dt in fp8 bf16; do
    for i in 1 2 3; do
      sb latency --backend triton --dtype "$dt" --seq 8192 --variant h15-sat --null --reference fa3
    done
  done
  sb latency --dtype fp8 --seq 16384 --rounds 3
fi
# Part 6 (FA3 staged): h15-folded (issue 15) beside h15-sat and A1 in one interleaving with the null and FA3, at
# FP8 and BF16 causal 8K, then sustained at FP8 against A0 with the null and FA3.
if [ "$PART" = 6 ]; then
  for dt in fp8 bf16; do
    sb sweep variants --backend triton --dtype "$dt" --seq 8192 --baseline A0 --variants h15-folded,h15-sat,A1 \
       --null --reference fa3
  done
  sb latency --backend triton --dtype fp8 --seq 8192 --variant h15-folded --null --reference fa3 --protocol sustained
fi
# Part 7 (Triton/Gluon only; not run yet: the session's device time ran out): the hybrids h15-1of4 and h15-1of2
# beside h15-folded and the null, FP8 then BF16 causal 8K; each sweep is packed as soon as it ends (the device time left was short).
if [ "$PART" = 7 ]; then
  for dt in fp8 bf16; do
    sb sweep variants --backend triton --dtype "$dt" --seq 8192 --baseline A0 --variants h15-folded,h15-1of4,h15-1of2 \
       --null --reference none
    [ -n "${OUT:-}" ] && tar czf "$OUT/part7-$dt.tgz" -C "$DIR" . && echo "packed part7-$dt"
  done
fi
