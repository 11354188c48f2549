#!/usr/bin/env bash
# Issue 15, prepared 2026-12-04 07:57 without device time left; sealed first: sealed/fp8-two.yaml. -pd at FP8 with
# two consumer warpgroups runs since 07:35 (the outputs that had differed were -ro's, fixed). Before -pd two
# consumers under hg2 gave h15-folded more than one (1.097-1.107 of FA3 against 1.072-1.093, 2026-12-03/04) and A0
# less; -pd gave the one-consumer default 4 points. Does two-consumer -pd beat the FP8 default's h15-folded (1.135 of
# FA3, 20261204T071142Z)?
# Step 1: the outputs first (gluon_probe --checks-only: against the simulation and plain(), bit for bit, and three
# launches at 8K), then 12 s screens at FP8 causal 8K, h15-folded: two consumers hg2 and hg8 with -mlf, hg2 with -ro
# and -mlf, and the FP8 default beside them. Step 2: 30 s of two consumers hg2 -mlf and of the default, back to back,
# whatever step 1 read, and the gates under the two-consumer label.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/fp8_two.sh 1` (carry .gpu/b)
set -uo pipefail
STEP=${1:?step 1 or 2}
PAYLOAD=
LEASE=fp8-two  # apart from other scripts' steps in the same lease (lease_step.sh)
. tools/gpu/lease_step.sh
two_hg2=gluon-n128s2-c240l24-hg2-pd-rla-lmt-tb-mlf
two_hg8=gluon-n128s2-c240l24-hg8-pd-rla-lmt-tb-mlf
two_ro=gluon-n128s2-c240l24-hg2-pd-rla-ro-lmt-tb-mlf
default=gluon-n128s2-c240l24-hg8-g1-pd-rla-lmt-tb-mlf
case "$STEP" in
1) timeout 240 python3 tools/gpu/gluon_probe.py "$DIR/probe" --checks-only --only=fp8 \
     --check-configs=$two_hg2,$two_ro --check-variants=A0,h15-folded --check-shapes=0,1,4,6,7 --repeat-equal=3 \
     | python3 -c "import sys, json; rows = [json.loads(x) for x in sys.stdin if x.startswith('{')]
print(sum(r.get('ok', False) for r in rows), 'of', len(rows), 'probe rows ok')
[print(json.dumps(r)) for r in rows if not r.get('ok')]"
   for label in $two_hg2 $two_hg8 $two_ro $default; do
     sb latency "${against_fa3[@]}" "${fp8_folded[@]}" --seq 8192 --budget-s 12 --triton-config $label
   done ;;
2) for label in $two_hg2 $default; do
     sb latency "${against_fa3[@]}" "${fp8_folded[@]}" --seq 8192 --triton-config $label
   done
   sb gates --backend triton --dtype fp8 --causal --variant h15-folded --triton-config $two_hg2 ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
