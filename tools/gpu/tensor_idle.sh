#!/usr/bin/env bash
# Issue 15, prepared 2026-12-04 12:19 after head_group_l2.sh (lease 12:04-12:12); sealed first:
# sealed/tensor-idle.yaml. At BF16 the tensor core idles 16.2% of the time in A0 at causal 8K and 12.3-12.6% at 16K,
# FA3 14.9% and 12.0% (tensor_busy.sh, head_group_l2.sh). Two lengths fit idle % = loop + per_block / T (T the key
# tiles of a mean causal block): A0 8.7% in the loop and 2.4 tiles per block, FA3 9.0% and 1.9
# (tools/analysis/tensor_idle_fit.py). Two points fit any line; causal 4K (T = 16.5) and 32K (T = 128.5) test it.
# Step 1: audits of A0 with FA3 under the 16-bit default at BF16 causal 4K and 32K, and non-causal 8K (64 key tiles
#         per block and no masked tile, beside causal 16K's 64.5 with one).
#   host:  call 1 `bash .gpu/a/install.sh` (carry .gpu/a); then at once
#          `bash .gpu/b/install.sh >/dev/null 2>&1; . /tmp/gpu-site/env.sh && bash tools/gpu/tensor_idle.sh 1` (carry
#          .gpu/b)
set -uo pipefail
STEP=${1:?step 1}
PAYLOAD=
LEASE=tensor-idle  # apart from other scripts' steps in the same lease (lease_step.sh)
. tools/gpu/lease_step.sh
audit=(python3 -m softbench audit --backend triton --dtype bf16 --variants A0 --reference fa3 --out "$DIR")
run() { local t0=$SECONDS; timeout 200 "${audit[@]}" "$@" 2>&1 | grep -v "━" | grep -E "tensor|duration|DRAM|session:"; echo "wall $((SECONDS - t0)) s: audit $*"; }
case "$STEP" in
1) run --causal --seq 4096
   run --causal --seq 32768
   run --no-causal --seq 8192
   python3 tools/analysis/tensor_idle_fit.py "$DIR" ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "$(basename "$DIR")"
