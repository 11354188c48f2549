#!/usr/bin/env bash
# Written 2026-12-02 after the lease of 06:13; steps 2 and 1 ran 07:15-07:19 (sessions/stalls-h200-20261202-0716,
# sessions/gluon-probe-h200-20261202-0718-tb3-*: every check passed); step 3 has not run. Step 2's samples are what
# `softbench audit --source-stalls` now records itself (tools/gpu/layouts.sh 2 runs it first).
# Issue 15, where the Gluon kernel's time goes against FA3's:
#   step 1: the variants under -tb that the GPU has not yet checked bit for bit against the kernel with the barriers
#           (BF16: A1, h15-proved, h15-folded, h15-1of4; FP8: A1, h15-proved);
#   step 3: the native audit at BF16 causal 8K with FA3 beside it (counters and warp stalls; the FP8 one is session
#           20261202T061510Z);
#   step 2: per-instruction warp-stall samples (Nsight Compute's SourceCounters) of one launch of Gluon A0 and of
#           FA3 at FP8 and BF16 causal 8K, each report's SASS page exported as CSV beside it: which instructions of
#           each key loop the warps wait on, and for what.
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then, back to back,
#          `bash .gpu/b/install.sh && . /tmp/gpu-site/env.sh && bash tools/gpu/stalls.sh N` (carry .gpu/b), N = 2, 1, 3
set -uo pipefail
STEP=${1:?step 1..3}
PAYLOAD=
. tools/gpu/lease_step.sh
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
source_page() {  # name backend variant dtype name-base regex
  local name=$1 backend=$2 variant=$3 dtype=$4 base=$5 regex=$6
  python3 - "$DIR/$name-request.json" "$backend" "$variant" "$dtype" <<'PY'
import json, sys
from softbench.core.shapes import Shape
path, backend, variant, dtype = sys.argv[1:]
json.dump({"backend": backend, "variant": variant, "shape": Shape(dtype=dtype, seq=8192, causal=True).to_dict(),
           "seed": 0, "warmup": 3, "calls": 1, "options": {}}, open(path, "w"))
PY
  timeout 150 "$NCU" --clock-control none --target-processes all --section SourceCounters --section WarpStateStats \
    --kernel-name-base "$base" --kernel-name "regex:$regex" --launch-skip 4 --launch-count 1 \
    -o "$DIR/$name" -f python3 -m softbench.audit.driver "$DIR/$name-request.json" "$DIR/$name-result.json" \
    > "$DIR/$name.log" 2>&1
  "$NCU" --import "$DIR/$name.ncu-rep" --page source --csv --print-source sass > "$DIR/$name-sass.csv" 2>>"$DIR/$name.log"
  echo "$name: $(wc -l < "$DIR/$name-sass.csv") lines of per-instruction samples"
}
case "$STEP" in
1) timeout 240 python3 tools/gpu/gluon_probe.py "$DIR/probe-tb-bf16" --only=bf16 --checks-only --check-shapes=0,2,3 \
     --check-configs=gluon-n128s2-c240l24-hg8-tb --check-variants=A1,h15-proved,h15-folded,h15-1of4 --repeat-equal=5
   timeout 150 python3 tools/gpu/gluon_probe.py "$DIR/probe-tb-fp8" --only=fp8 --checks-only --check-shapes=0,2 \
     --check-configs=gluon-n128s2-c240l24-hg8-g1-tb --check-variants=A1,h15-proved --repeat-equal=5 ;;
3) timeout 170 python3 -m softbench audit --backend triton --dtype bf16 --seq 8192 --causal --variants A0,h15-sat \
     --reference fa3 --out "$DIR" 2>&1 | grep -v "━" ;;
2) for dtype in fp8 bf16; do
     source_page "gluon-a0-$dtype" triton A0 $dtype function _attn_fwd
     source_page "fa3-$dtype" ref-fa3 A0 $dtype demangled FlashAttnFwdSm90
   done ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "step$STEP"
