# Sourced by a lease's step script (issue14_18.sh, start_order_gemma.sh, trim_sync.sh) with STEP and, where it
# carries one, PAYLOAD (the packed payload's folder, e.g. .gpu/pay2) set: unpacks this call's chunk
# (tools/gpu/payload.py), loads what has arrived, and gives the step its own sessions folder DIR, `sb`, softbench
# with the wall time of each command, and `sbt`, the same under a time limit. The step packs DIR into $OUT at its
# end (pack.sh).
# A lease with nothing to carry beyond FA4 and FA3 (staged .gpu/a and .gpu/b) leaves PAYLOAD empty: the staged
# runtime's env.sh, already loaded by the call's command line, is all there is.
# A step script that may share a lease with another's steps sets LEASE (its name, e.g. p-round) before sourcing
# this: its folder is then /tmp/sb/LEASE-stepN, apart from the other's /tmp/sb/stepN, and it packs under that name.
if [ -n "${PAYLOAD:-}" ]; then
  python3 "$PAYLOAD/c$STEP/payload.py" unpack || exit 4
  . "${SOFTBENCH_PAYLOAD_DIR:-/tmp/softbench-payload}/env.sh"
fi
DIR=/tmp/sb/${LEASE:+$LEASE-}step$STEP
mkdir -p "$DIR"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
sb() { local t0=$SECONDS; python3 -m softbench "$@" --out "$DIR" 2>&1 | grep -v "━"; echo "wall $((SECONDS - t0)) s: softbench $*"; }
# the same under a limit in seconds (the first argument), for steps whose kernel might deadlock (a new schedule or
# hand-over), which would otherwise hold the call to its limit; sbt: under 150 s, which most runs fit
sb_within() { local limit=$1 t0=$SECONDS; shift; timeout "$limit" python3 -m softbench "$@" --out "$DIR" 2>&1 | grep -v "━"; echo "wall $((SECONDS - t0)) s: softbench $*"; }
sbt() { sb_within 150 "$@"; }
# what every latency run of issue 15's leases names: equal clock with the A/A null and FA3 in the same run, and
# each dtype's Rowmax-H15 form (h15-folded at FP8, h15-sat at BF16)
against_fa3=(--backend triton --null --reference fa3 --start-order shuffled)
# the same, sustained at the power cap: each kernel in its own blocks (the order of the blocks is the protocol's own)
sustained_fa3=(--backend triton --null --reference fa3 --protocol sustained)
fp8_folded=(--dtype fp8 --variant h15-folded)
bf16_sat=(--dtype bf16 --variant h15-sat)
