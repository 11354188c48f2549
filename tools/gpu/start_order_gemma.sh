#!/usr/bin/env bash
# The lease of 2026-12-02 00:49-01:15 UTC (planned 2026-12-01), as run: five calls, each carrying one 57.7 MiB
# chunk of a 303 MB payload (FA3's wheel, transformers 5.24.0's wheel, the Austen and KJV texts, the gguf wheel, Gemma-3-270M).
#   here:  C=~/.cache/softbench-gpu; python3 tools/gpu/payload.py pack .gpu/pay2 --chunk-mib 57.7016 \
#            FA3_WHEEL=$C/fa3/fa3_fwd-0.0.3-*.whl TRANSFORMERS_WHEEL=transformers-5.24.0-py3-none-any.whl \
#            SOFTBENCH_SECOND_TEXT=kjv.txt SOFTBENCH_AUSTEN_TEXT=austen.txt GGUF_WHEEL=gguf-0.19.0-*.whl \
#            SOFTBENCH_GEMMA3_FILE=gemma-3-270m-q4_k_m.gguf      (tools/kjv_text.sh writes kjv.txt)
#   host:  bash tools/gpu/start_order_gemma.sh N   (carry .gpu/pay2/cN), N = 1..5, back to back
# Steps 1-4 (issue 14): does the null's offset follow the baseline's role or the first-started process? Thirteen
# interleavings of four or more kernels with --start-order shuffled (step 2 and step 4's last three with -ppn); `softbench report` over them prints the
# nulls grouped by which twin started first. Steps 1 and 3 also gate the Gluon kernel's h15-folded and hybrids
# against their own weight maps (issue 15's "correct form": the gates until now held them to A1's lattice).
# Step 5 (issue 18): Gemma-3-270M on both corpora under transformers 5.24.0, whose rebuilt tokenizer passes
# softbench's GGUF check (5.17.0's does not).
set -uo pipefail
STEP=${1:?step 1..5}
PAYLOAD=.gpu/pay2
. tools/gpu/lease_step.sh
lat=(latency --backend triton --seq 8192 --null --reference fa3 --start-order shuffled)
ppn=gluon-n128s2-c240l24-hg8-ppn
case "$STEP" in
1) sb env --record
   for i in 1 2 3; do sb "${lat[@]}" --dtype bf16 --variant h15-sat; done
   # about 25 s a gates run; the Gluon kernel is the backend's default at BF16 on sm_90
   for v in h15-folded h15-1of4 h15-1of2; do sb gates --backend triton --dtype bf16 --variant "$v"; done ;;
2) # issue 15 (A0 at FA3 parity): the ping-pong through named barriers (-ppn, FA3's hand-over; never run yet).
   # Checked against the simulation first at both dtypes, under a timeout in case the hand-over deadlocks; then
   # A0 / FA3 in sessions (also interleavings for the start-order count). /tmp/sb/ppn-ok tells step 4.
   if timeout 240 python3 tools/gpu/gluon_probe.py /tmp/sb/probe-ppn --only=bf16,fp8 --checks-only \
        --check-configs=$ppn --check-variants=A0,h15-sat; then
     touch /tmp/sb/ppn-ok
     for c in --causal --no-causal; do sb "${lat[@]}" --dtype bf16 $c --variant h15-sat --triton-config $ppn; done
     sb "${lat[@]}" --dtype fp8 --variant h15-sat --triton-config $ppn
   else echo "ppn probe: exit $? (124: timed out, a deadlock)"; sb "${lat[@]}" --dtype bf16 --variant h15-sat; fi
   cp -r /tmp/sb/probe-ppn "$DIR/" 2>/dev/null ;;
3) for i in 1 2; do
     sb sweep variants --backend triton --dtype fp8 --seq 8192 --baseline A0 --variants h15-folded,h15-sat,A1 \
        --null --reference fa3 --start-order shuffled
   done
   for c in --causal --no-causal; do sb gates --backend triton --dtype fp8 $c --variant h15-folded; done ;;
4) for i in 1 2; do sb "${lat[@]}" --dtype fp8 --variant h15-sat; done
   [ -f /tmp/sb/ppn-ok ] && sb "${lat[@]}" --dtype fp8 --no-causal --variant h15-sat --triton-config $ppn
   [ -f /tmp/sb/ppn-ok ] && for d in fp8 bf16; do sb "${lat[@]/8192/16384}" --dtype $d --variant h15-sat --triton-config $ppn; done
   python3 -m softbench report /tmp/sb/step1 /tmp/sb/step2 /tmp/sb/step3 /tmp/sb/step4 --out /tmp/sb-report > /dev/null && sed -n '/## A\/A nulls across/,/^## [^A]/p' /tmp/sb-report/report.md ;;
5) python3 -c "import transformers; print('transformers', transformers.__version__)"
   g=(fidelity --dtype bf16 --bootstrap 5000 --seed 0 --max-blocks 97 --model "$SOFTBENCH_GEMMA3_FILE" --device cuda
      --operator rowmax-h15 --operator rowmax-h15-sat)
   # sliding window 512: the simulation takes blocks within it; --bos auto now finds the GGUF's BOS
   sb "${g[@]}" --corpus "$SOFTBENCH_AUSTEN_TEXT" --block-len 512 --path sim
   sb "${g[@]}" --corpus "$SOFTBENCH_SECOND_TEXT" --block-len 512 --path sim
   sb "${g[@]}" --corpus "$SOFTBENCH_AUSTEN_TEXT" --block-len 2048 --path row ;;
esac
[ -n "${OUT:-}" ] && bash tools/gpu/pack.sh "$DIR" "step$STEP"
