#!/usr/bin/env bash
# Issue 3 on the H200 (sm_90; FA4 has no FP8 there, so BF16): an energy session and an Nsight Systems trace.
#   energy: BF16 causal 16K, loops A0,A1,A1,A0 of ${SOFTBENCH_ENERGY_SECONDS:-45} s (5 s idle + 2 s + loop + 1 s each)
#           about 4 min with 45 s loops; SOFTBENCH_ENERGY_SECONDS=20 makes it about 2 min
#   trace:  BF16 causal 4K, 8K, 16K, A0 and A1, each in its own process under nsys, about 2-3 min
#   sweep:  the emulation sweep's dry run and its refusal on sm_90 (seconds)
# Total about 6.5-7 min with 45 s loops. Run from the project root after `. /tmp/gpu-site/env.sh`.
# Sessions go to ${1:-sessions}.
set -uo pipefail
OUTDIR=${1:-sessions}
SECS=${SOFTBENCH_ENERGY_SECONDS:-45}
mkdir -p "$OUTDIR"
sb() { python3 -m softbench "$@" 2>&1 | grep -v '━'; return "${PIPESTATUS[0]}"; }
T0=$(date +%s)

echo "== nsys: $(command -v nsys || echo 'NOT ON PATH')"
nsys --version || echo "nsys --version failed"

echo "== energy (BF16 causal 16K, ${SECS} s loops, A0,A1,A1,A0)"
sb energy --backend fa4 --protocol energy --seconds "$SECS" --out "$OUTDIR"
echo "energy exit code: $?  ($(( $(date +%s) - T0 )) s so far)"

echo "== trace (BF16 causal 4K/8K/16K, A0 and A1)"
sb trace run --backend fa4 --dtype bf16 --causal --seq 4K --seq 8K --seq 16K --variants A0,A1 --out "$OUTDIR"
echo "trace exit code: $?  ($(( $(date +%s) - T0 )) s so far)"

echo "== emulation sweep: dry run, then the refusal on sm_90 (expect exit code 3)"
sb sweep emulation --dry-run | tail -4
sb sweep emulation --out "$OUTDIR"; echo "sweep emulation on sm_90 exit code: $?"

echo "== short table ($(( $(date +%s) - T0 )) s in all)"
python3 - "$OUTDIR" <<'EOF'
import json, sys
from pathlib import Path

out = Path(sys.argv[1])

def newest(cmd):
    found = sorted(out.glob(f"*-{cmd}-*/summary.json"))
    return json.loads(found[-1].read_text()) if found else None

e = newest("energy")
f = lambda x, s: ("-" if x is None else format(x, s)).rjust(int(s.split(".")[0].lstrip("+") or 0))
if e:
    print(f"energy {e['shape_tag']} ({e['dtype']}; complete={e['complete']}), mJ per forward:")
    print(f"  {'kernel':6} {'loops':>5} {'ms/fwd':>8} {'mean W':>7} {'sampled':>9} {'no ramp':>9} {'counter':>9} {'SM MHz':>7}")
    for name, v in e["variants"].items():
        m = v["energy_per_forward_mj"]
        print(f"  {name:6} {v['loops']:>5} {v['time_per_forward_ms']:>8.4f} {v['mean_power_w']:>7.1f} "
              f"{f(m['sampled'], '9.2f')} {f(m['sampled_no_ramp'], '9.2f')} {f(m['counter'], '9.2f')} "
              f"{f(v['median_sm_clock_mhz'], '7.0f')}")
    for name, r in e["vs_baseline"].items():
        c = r["change_pct"]
        pct = lambda x: "n/a" if x is None else f"{x:+.2f}%"
        print(f"  {name} vs {e['baseline']}: energy/forward sampled {pct(c['sampled'])}, counter {pct(c['counter'])}; "
              f"time/forward {pct(c['time_per_forward'])}, mean power {pct(c['mean_power'])}")
else:
    print("no energy session")
t = newest("trace")
if t:
    print(f"trace (source: {t['source']}{' -- NSYS WAS NOT USED' if t['source'] != 'nsys' else ''}; "
          f"complete={t['complete']}):")
    print(f"  {'seq':>6} {'kernel us A0/A1':>20} {'call us A0/A1':>20} {'kernel':>8} {'call':>8} {'non-kernel % A0/A1':>19}")
    for r in t["table"]:
        b, v = r["baseline"], r["variant"]
        k, c, n = r["kernel_us"], r["call_latency_us"], r["non_kernel_pct"]
        print(f"  {r['seq']:>6} {k[b]:>9.3f}/{k[v]:<10.3f} {c[b]:>9.3f}/{c[v]:<10.3f} "
              f"{r['kernel_only_speedup_pct']:>+7.1f}% {r['call_latency_speedup_pct']:>+7.1f}% "
              f"{n[b]:>9.1f}/{n[v]:<9.1f}")
    for p in t["points"]:
        for note in p.get("notes", []):
            print(f"  note {p['shape_tag']} {p['variant']}: {note}")
else:
    print("no trace session")
EOF
