#!/usr/bin/env bash
# Issue 15: the FP8 default after it took per-thread row sums (-lt, gluon-n128s2-c240l24-hg8-g1-lt-tb): the gates of
# the FP8 Rowmax-H15 forms under it (h15-folded causal and not, h15-sat causal), then the design card's kind of run
# with nothing named (--triton-config left out: the backend's default), FP8 causal 8K, h15-folded against A0 with
# the null and FA3 in the same interleaving.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh && . /tmp/gpu-site/env.sh && bash tools/gpu/fp8_lt_default.sh 1` (carry .gpu/b)
set -uo pipefail
STEP=${1:?step 1}
PAYLOAD=
. tools/gpu/lease_step.sh
case "$STEP" in
1) for c in --causal --no-causal; do sb gates --backend triton --dtype fp8 $c --variant h15-folded; done
   sb gates --backend triton --dtype fp8 --causal --variant h15-sat
   sb latency --backend triton --null --reference fa3 --start-order shuffled --dtype fp8 --seq 8192 \
     --variant h15-folded ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "step$STEP"
