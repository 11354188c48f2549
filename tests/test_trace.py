"""Kernel-duration ingestion (nsys CSV in every header spelling, SQLite, torch.profiler), the Table B4 arithmetic,
finding nsys, and the trace engine end to end with a stand-in nsys on the CPU."""

import json
import sqlite3
import stat
import sys
from pathlib import Path

import pytest
import yaml

from conftest import run_module
from softbench.core.errors import UsageError
from softbench.trace import ingest as ti
from softbench.trace.summary import b4_rows, halves_drift, non_kernel_pct

DATA = Path(__file__).resolve().parent / "data"
ATTN = "void flash_fwd<128, (bool)1>(Params, int, float)"  # a name with commas, quoted in CSV

HEADERS = {
    "2024": "Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name",
    "2021": "Time(%),Total Time (ns),Instances,Average (ns),Median (ns),Minimum (ns),Maximum (ns),StdDev (ns),Name",
    "2023-mixed": "Time (%),Total Time (ns),Instances,Average (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name",
}


@pytest.mark.parametrize("spelling", sorted(HEADERS))
@pytest.mark.parametrize("preamble", ["", "Generating SQLite file r.sqlite from r.nsys-rep\nProcessing [r.sqlite] with "
                                          "[cuda_gpu_kern_sum.py]...\n\n ** CUDA GPU Kernel Summary (cuda_gpu_kern_sum):\n\n"])
def test_kern_sum_csv_in_every_header_spelling(tmp_path, spelling, preamble):
    f = tmp_path / "k_cuda_gpu_kern_sum.csv"
    f.write_text(preamble + HEADERS[spelling] + "\n"
                 f'90.0,9000,10,900.0,880.0,850,990,40.5,"{ATTN}"\n'
                 '10.0,1000,20,50.0,49.0,40,70,5.1,"fill_kernel"\n')
    t = ti.read_kern_sum_csv(f)
    assert [r.name for r in t.by_total()] == [ATTN, "fill_kernel"]
    k = t.dominant()
    assert (k.instances, k.total_ns, k.median_ns, k.avg_ns, k.min_ns, k.max_ns, k.std_ns, k.time_pct) == \
        (10, 9000.0, 880.0, 900.0, 850.0, 990.0, 40.5, 90.0)


@pytest.mark.parametrize("name, attn, instances, median_ns", [
    ("nsys_cuda_gpu_kern_sum_2024.csv", "FlashAttentionForwardSm100<(int)128, (bool)1>", 250, 725824.0),
    ("nsys_gpukernsum_2021.csv", "flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64", 50, 779500.0),
    ("nsys_gpukernsum_2022_grid.csv", "FlashAttentionForwardSm90", 10, 8750.0),
])
def test_recorded_style_fixtures(name, attn, instances, median_ns):
    t = ti.read_any(DATA / name)
    k = t.dominant()
    assert attn in k.name and k.instances == instances and k.median_ns == median_ns
    assert len(t.rows) == 2


def test_csv_without_a_header_is_refused(tmp_path):
    f = tmp_path / "x.csv"
    f.write_text("Processing [r.sqlite]...\nSKIPPED: r.sqlite does not contain CUDA kernel data.\n")
    with pytest.raises(UsageError, match="no cuda_gpu_kern_sum header"):
        ti.read_kern_sum_csv(f)


def _make_sqlite(path: Path, kernels, name_col="demangledName", with_strings=True):
    con = sqlite3.connect(path)
    if with_strings:
        con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
        names = sorted({n for n, _, _ in kernels})
        ids = {n: i + 1 for i, n in enumerate(names)}
        con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, n) for n, i in ids.items()])
        con.execute(f"CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, {name_col} INTEGER, "
                    "deviceId INTEGER)")
        con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?, 0)",
                        [(s, e, ids[n]) for n, s, e in kernels])
    else:
        con.execute(f"CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, {name_col} TEXT)")
        con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?)", [(s, e, n) for n, s, e in kernels])
    con.commit()
    con.close()


# inserted out of order on purpose: durations come back in start order
KERNELS = [(ATTN, 3000, 3700), (ATTN, 1000, 1500), ("fill", 1600, 1620), (ATTN, 2000, 2600), ("fill", 2700, 2730)]


@pytest.mark.parametrize("name_col", ["demangledName", "shortName"])
def test_sqlite_export(tmp_path, name_col):
    f = tmp_path / "r.sqlite"
    _make_sqlite(f, KERNELS, name_col)
    t = ti.read_any(f)
    k = t.dominant()
    assert k.name == ATTN and k.instances == 3
    assert k.durations_ns == [500.0, 600.0, 700.0]
    assert k.median_ns == 600.0 and k.total_ns == 1800.0
    assert k.time_pct == pytest.approx(100 * 1800 / 1850)


@pytest.mark.parametrize("suffix", [".db", ".sqlite3", ".SQLITE"])
def test_an_sqlite_export_is_read_by_any_of_its_suffixes(tmp_path, suffix):
    f = tmp_path / f"r{suffix}"
    _make_sqlite(f, KERNELS, "demangledName")
    t = ti.read_any(f)
    assert t.source == "nsys sqlite" and t.dominant().durations_ns == [500.0, 600.0, 700.0]


def test_sqlite_without_kernel_table_is_refused(tmp_path):
    f = tmp_path / "r.sqlite"
    sqlite3.connect(f).execute("CREATE TABLE TARGET_INFO_GPU (id INTEGER)").connection.commit()
    with pytest.raises(UsageError, match="CUPTI_ACTIVITY_KIND_KERNEL"):
        ti.read_kernels_sqlite(f)


def test_torch_profiler_trace():
    t = ti.read_any(DATA / "torch_profiler_trace.json")
    k = t.dominant()
    assert k.name == "attention_fwd_kernel<128, true>" and k.instances == 5
    assert k.median_ns == 407000.0  # microseconds in the trace, nanoseconds here
    assert t.source == "torch.profiler"


def test_unknown_and_raw_files(tmp_path):
    raw = tmp_path / "r.nsys-rep"
    raw.write_bytes(b"\0")
    with pytest.raises(UsageError, match="raw Nsight Systems report") as e:
        ti.read_any(raw)
    assert e.value.hint.startswith("nsys export --type sqlite")
    with pytest.raises(UsageError, match="does not exist"):
        ti.read_any(tmp_path / "missing.csv")
    (tmp_path / "x.txt").write_text("")
    with pytest.raises(UsageError, match="unknown export type"):
        ti.read_any(tmp_path / "x.txt")


def test_ingest_command_prints_kernels(cli):
    r = cli("trace", "ingest", str(DATA / "nsys_gpukernsum_2021.csv"), str(DATA / "torch_profiler_trace.json"), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [o["source"] for o in out] == ["nsys cuda_gpu_kern_sum csv", "torch.profiler"]
    assert out[0]["kernels"][0]["median_ns"] == 779500.0 and out[0]["kernels"][0]["instances"] == 50


def test_trace_run_refuses_without_a_gpu(cli, tmp_path):
    r = cli("trace", "run", "--backend", "sim", "--seq", "128", "--out", str(tmp_path))
    assert r.returncode == 3 and "CUDA GPU" in r.stderr and "trace ingest" in r.stderr


# --- Table B4 arithmetic ----------------------------------------------------------------------------------------
def test_non_kernel_share():
    assert non_kernel_pct(17.840, 45.611) == pytest.approx(100 - 100 * 17.840 / 45.611)
    assert non_kernel_pct(50.0, 50.0) == 0.0
    with pytest.raises(ValueError):
        non_kernel_pct(1.0, 0.0)


def test_b4_rows_by_hand():
    pts = [
        {"seq": 8192, "causal": True, "variant": "A0", "kernel_median_us": 200.0, "call_latency_us": 202.0,
         "kernel_median_timed_us": 199.0},
        {"seq": 8192, "causal": True, "variant": "A1", "kernel_median_us": 160.0, "call_latency_us": 170.0,
         "kernel_median_timed_us": 159.2},
        {"seq": 1024, "causal": True, "variant": "A1", "kernel_median_us": 16.0, "call_latency_us": 40.0},
        {"seq": 1024, "causal": True, "variant": "A0", "kernel_median_us": 18.0, "call_latency_us": 45.0},
    ]
    rows = b4_rows(pts, "A0")
    assert [r["seq"] for r in rows] == [1024, 8192]
    r8 = rows[1]
    assert r8["kernel_only_speedup_pct"] == pytest.approx(25.0)  # 200 / 160 - 1
    assert r8["call_latency_speedup_pct"] == pytest.approx(100 * (202 / 170 - 1))
    assert r8["kernel_only_speedup_timed_pct"] == pytest.approx(25.0)
    assert r8["non_kernel_pct"]["A0"] == pytest.approx(100 - 100 * 200 / 202)
    assert r8["non_kernel_pct"]["A1"] == pytest.approx(100 - 100 * 160 / 170)
    assert rows[0]["kernel_only_speedup_pct"] == pytest.approx(12.5) and rows[0]["kernel_only_speedup_timed_pct"] is None
    assert b4_rows(pts[:1], "A0") == []  # a baseline alone makes no row


# --- finding nsys -----------------------------------------------------------------------------------------------


def test_the_halves_of_a_window_by_hand():
    """The first and the last half of the calls in call order; an odd middle call belongs to neither."""
    d = halves_drift([400.0, 400.0, 400.0, 452.0, 452.0, 452.0, 452.0, 452.0])
    assert (d["first_half"], d["second_half"]) == (400.0, 452.0)
    assert d["change_pct"] == pytest.approx(13.0)
    d = halves_drift([10.0, 12.0, 99.0, 11.0, 11.0])
    assert (d["first_half"], d["second_half"]) == (11.0, 11.0) and d["change_pct"] == 0.0
    assert halves_drift([1.0, 2.0, 3.0]) is None


def _traced_point(durations_ns, warmup=50, calls=200, source="nsys", settle_calls=0):
    from softbench.core.shapes import Shape
    from softbench.trace.engine import TraceOptions, _point_record

    row = ti.KernelRow(name="attn", instances=len(durations_ns), total_ns=sum(durations_ns),
                       median_ns=float(sorted(durations_ns)[len(durations_ns) // 2]), durations_ns=list(durations_ns))
    table = ti.KernelTable(source=source, path="stand-in", rows=[row])
    opts = TraceOptions(shapes=(Shape(seq=8192),), warmup=warmup, calls=calls, nsys="nsys")
    latency = {"call_latency_us": 460.0, "warmup": warmup, "calls": calls, "settle_calls": settle_calls}
    return _point_record(opts, opts.shapes[0], "A0", source, table, table, latency, [])


def test_a_kernel_that_slowed_inside_its_window_is_named_in_the_point():
    """What an H100 gave FA4's BF16 A0 at causal 8K (2026-12-07): the board at full clock for the warm-up and the
    first 80 timed calls, about 13% slower after, so the median over all calls (400 us) and over the timed calls
    (452 us) tell different stories. The point says the clock moved, with both halves' medians."""
    p = _traced_point([400_000.0] * 130 + [452_000.0] * 120)
    assert p["kernel_median_timed_us"] == pytest.approx(452.0)
    halves = p["kernel_timed_halves_us"]
    assert (halves["first_half"], halves["second_half"]) == (pytest.approx(400.0), pytest.approx(452.0))
    [note] = p["notes"]
    assert "+13.0%" in note and "equal clock" in note


def test_a_steady_kernel_gets_no_clock_note():
    """A change between the halves within 2% is a kernel's own scatter, not a clock that moved."""
    p = _traced_point([400_000.0] * 150 + [407_000.0] * 100)
    assert p["kernel_timed_halves_us"]["change_pct"] == pytest.approx(1.75)
    assert p["notes"] == []
    p = _traced_point([400_000.0] * 150 + [409_000.0] * 100)  # 2.25%: noted
    assert len(p["notes"]) == 1 and "+2.2%" in p["notes"][0]


def test_the_settle_steps_calls_are_traced_before_the_warm_up_and_the_timed_calls():
    """Settling runs inside the profiler range, so nsys records its calls first: they count among the expected
    instances, and the timed median is still the last `calls` calls'."""
    p = _traced_point([300_000.0] * 100 + [460_000.0] * 50 + [450_000.0] * 200, settle_calls=100)
    assert p["notes"] == [] and p["kernel_median_timed_us"] == pytest.approx(450.0)
    p = _traced_point([450_000.0] * 250, settle_calls=100)
    assert p["kernel_median_timed_us"] is None
    assert p["notes"] == ["250 instances of the attention kernel, expected 350: no timed-calls-only median",
                          "attention kernel ran 250 times in the trace, expected 350"]


def test_the_median_over_all_traced_calls_names_the_phases_that_ran():
    """The scope of the all-calls median says what the profiler range held: settle calls only where settling ran
    (not under --no-settle, nor where NVML could not read the board), the warm-up only where it had calls."""
    from softbench.trace.driver import traced_phases

    assert _traced_point([450_000.0] * 350, settle_calls=100)["kernel_median_scope"] == \
        "all traced calls (settle, warm-up and timed calls)"
    assert _traced_point([450_000.0] * 250)["kernel_median_scope"] == "all traced calls (warm-up and timed calls)"
    assert _traced_point([450_000.0] * 200, warmup=0)["kernel_median_scope"] == "all traced calls (timed calls)"
    assert traced_phases(40, 0) == "settle and timed calls"
    torch_pass = _traced_point([450_000.0] * 20, warmup=5, calls=20, source="torch.profiler")
    assert torch_pass["kernel_median_scope"] == "20 profiled calls after the timed window"


def _beside(table, attention):
    """The kernels a traced point names beside its attention kernel, from an ingested table (as the engine asks)."""
    from softbench.trace.summary import kernels_beside

    return kernels_beside([(r.name, r.total_ns) for r in table.rows], attention.name)


def test_a_second_kernel_per_call_is_named_beside_the_kernel_only_speed_up():
    """h15-folded's calls launch the key-norm kernel before the forward; the kernel-only columns time the forward
    alone, so the point names the other kernel and its share. The CSV is the one an H100 recorded
    (20261207T110153Z): _key_norm_max at 2.3% of h15-folded's GPU time, nothing beside A0's forward."""
    from softbench.trace.summary import kernels_beside

    points = Path(__file__).resolve().parents[1] / "sessions" / \
        "20261207T110153Z-trace-fp8-causal-8K-triton-A0-h15-folded" / "points"
    folded = ti.read_kern_sum_csv(points / "fp8-8K-causal-b1h16d128-h15-folded" / "kern_cuda_gpu_kern_sum.csv")
    assert [(n, round(p, 1)) for n, p in _beside(folded, folded.dominant())] == [("_key_norm_max", 2.3)]
    a0 = ti.read_kern_sum_csv(points / "fp8-8K-causal-b1h16d128-A0" / "kern_cuda_gpu_kern_sum.csv")
    assert _beside(a0, a0.dominant()) == []
    # 400 ns beside 450 us per call is under the 0.5% floor; two kernels come largest first
    assert kernels_beside([("attn", 450_000.0), ("memset", 400.0)], "attn") == []
    assert kernels_beside([("a", 90.0), ("n", 4.0), ("m", 6.0)], "a") == [("m", 6.0), ("n", 4.0)]
    assert kernels_beside([], "a") == []

    row = ti.KernelRow(name="attn", instances=250, total_ns=250 * 450_000.0, median_ns=450_000.0,
                       durations_ns=[450_000.0] * 250)
    norms = ti.KernelRow(name="_key_norm_max", instances=250, total_ns=250 * 9_000.0, median_ns=9_000.0)
    from softbench.core.shapes import Shape
    from softbench.trace.engine import TraceOptions, _point_record
    opts = TraceOptions(shapes=(Shape(seq=8192),), warmup=50, calls=200, nsys="nsys")
    table = ti.KernelTable(source="nsys", path="stand-in", rows=[row, norms])
    p = _point_record(opts, opts.shapes[0], "h15-folded", "nsys", table, table,
                      {"call_latency_us": 470.0, "warmup": 50, "calls": 200}, [])
    [note] = p["notes"]
    assert note.startswith("besides the attention kernel, h15-folded's calls ran _key_norm_max (2.0%)")


def test_a_first_half_of_zero_duration_gives_no_percent_and_no_crash():
    """The readers keep kernels of no duration, so the first half's median can be 0 ns; the change between the halves
    then has no percent (None, not a division), and the point is recorded without a clock note instead of failing
    (a mutation check found `abs(None)` here)."""
    p = _traced_point([0.0] * 10 + [1000.0] * 10, warmup=5, calls=20, source="torch.profiler")
    assert p["kernel_timed_halves_us"] == {"first_half": 0.0, "second_half": 1.0, "change_pct": None}
    assert not any("moved by" in n for n in p["notes"])


def test_a_torch_profiler_pass_is_checked_for_a_moving_clock_too():
    """torch.profiler's separate pass of `calls` calls has no warm-up inside it: all its calls are the ones split."""
    p = _traced_point([300_000.0] * 10 + [330_000.0] * 10, warmup=5, calls=20, source="torch.profiler")
    assert p["kernel_median_timed_us"] is None  # the timed-only median is nsys's alone
    assert p["kernel_timed_halves_us"]["change_pct"] == pytest.approx(10.0) and "+10.0%" in p["notes"][0]


def test_find_nsys_prefers_path_then_the_newest_install(tmp_path):
    from softbench.trace.engine import find_nsys

    assert find_nsys(which=lambda n: "/usr/bin/nsys", globber=lambda p: []) == "/usr/bin/nsys"
    bins = []
    for v in ("2024.6.2", "2025.3.1", "2024.10.1"):
        b = tmp_path / v / "nsys"
        b.parent.mkdir()
        b.write_text("")
        b.chmod(0o755)
        bins.append(str(b))
    pattern = "/opt/nvidia/nsight-systems/*/bin/nsys"
    got = find_nsys(which=lambda n: None, globber=lambda p: bins if p == pattern else [])
    assert got == str(tmp_path / "2025.3.1" / "nsys")
    assert find_nsys(which=lambda n: None, globber=lambda p: []) is None


# --- the engine with a stand-in nsys ----------------------------------------------------------------------------
FAKE_NSYS = '''#!{python}
"""Stands in for Nsight Systems: runs the profiled command, then writes a kern_sum CSV and a SQLite export
whose attention kernel takes {{A0: 1000, A1: 800}} ns per call, as many calls as the driver recorded."""
import json, os, sqlite3, subprocess, sys
from pathlib import Path

args = sys.argv[1:]
if args == ["--version"]:
    print("NVIDIA Nsight Systems version 2099.1.1-standin")
    sys.exit(0)

def opt(name):
    return args[args.index(name) + 1]

def durations(rep):
    lat = json.loads((Path(rep).parent / "latency.json").read_text())
    per = {{"A0": 1000, "A1": 800}}[lat["variant"]]
    return [per + (i % 3) for i in range(lat["warmup"] + lat["calls"])]

if args[0] == "profile":
    i = 1
    while args[i].startswith("-"):
        i += 2 if args[i] == "-o" else 1
    out = opt("-o")
    rc = subprocess.call(args[i:])
    Path(out + ".nsys-rep").write_text("stand-in report")
    sys.exit(rc)
if args[0] == "stats":
    rep = args[-1]
    d = durations(rep)
    med = sorted(d)[len(d) // 2]
    Path(opt("-o") + "_cuda_gpu_kern_sum.csv").write_text(
        "Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\\n"
        f'99.0,{{sum(d)}},{{len(d)}},{{sum(d) / len(d)}},{{med}},{{min(d)}},{{max(d)}},1.0,"attn<128, true>(Params)"\\n'
        f'1.0,{{len(d) * 10}},{{len(d)}},10.0,10.0,10,10,0.0,"fill"\\n')
    sys.exit(0)
if args[0] == "export":
    rep = args[-1]
    con = sqlite3.connect(opt("-o"))
    con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
    con.execute("INSERT INTO StringIds VALUES (1, 'attn<128, true>(Params)')")
    con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, demangledName INTEGER)")
    t = 0
    for x in durations(rep):
        con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 1)", (t, t + x))
        t += 5000
    con.commit()
    sys.exit(0)
sys.exit(9)
'''


@pytest.fixture(scope="module")
def stand_in_trace(tmp_path_factory):
    """One trace run under the stand-in nsys, shared by the tests below (each driver process imports torch). It
    passes a backend option, which must reach the drivers; the sim's timings do not enter the stand-in's data."""
    from softbench.trace.engine import TraceOptions, run_trace
    from softbench.core.shapes import Shape

    tmp_path = tmp_path_factory.mktemp("trace")
    nsys = tmp_path / "nsys"
    nsys.write_text(FAKE_NSYS.format(python=sys.executable))
    nsys.chmod(nsys.stat().st_mode | stat.S_IEXEC)
    opts = TraceOptions(shapes=(Shape(seq=64, heads=2),), variants=("A0", "A1"), backend="sim", warmup=3, calls=5,
                        nsys=str(nsys), out_dir=tmp_path / "s", backend_options={"rescale_threshold": 8.0})
    return run_trace(opts)


def test_trace_engine_end_to_end_with_a_stand_in_nsys(stand_in_trace):
    session = stand_in_trace
    summary = json.loads((session.path / "summary.json").read_text())
    assert summary["command"] == "trace" and summary["complete"] and summary["source"] == "nsys"
    assert "2099.1.1-standin" in summary["tool"]["nsys_version"]
    a0, a1 = summary["points"]
    assert a0["kernel_name"] == "attn<128, true>(Params)" and a0["kernel_instances"] == 8
    assert a0["kernel_median_us"] == pytest.approx(1.001) and a1["kernel_median_us"] == pytest.approx(0.801)
    # the timed calls are the last five of eight: durations 1000 + (i % 3) for i = 3..7 -> median 1001
    assert a0["kernel_median_timed_us"] == pytest.approx(1.001)
    # the stand-in's "fill" kernel, 80 ns against the forward's 8,008 ns, is named beside the kernel-only figures
    assert a0["notes"] == ["besides the attention kernel, A0's calls ran fill (1.0%) of the trace's GPU time: the "
                           "kernel-only columns leave that out, the call latency includes it"]
    for p in (a0, a1):
        assert p["call_latency_us"] > 0  # the driver's own timing of the sim on the CPU
        assert p["non_kernel_pct"] == pytest.approx(100 - 100 * p["kernel_median_us"] / p["call_latency_us"])
        assert {"latency.json", "trace.nsys-rep", "trace.sqlite", "kern_cuda_gpu_kern_sum.csv", "driver.log"} <= set(p["files"])
    row = summary["table"][0]
    assert row["kernel_only_speedup_pct"] == pytest.approx(100 * (1.001 / 0.801 - 1))
    md = (session.path / "summary.md").read_text()
    assert md.count("| 64 | causal |") == 1  # one Table B4 row
    # settling was asked for (the default rule, recorded with the run), but the CPU has no board to read: the
    # quantity says it did not settle
    from softbench.runtime.settle import SettleRule

    assert summary["settle"] == SettleRule().to_dict()
    from test_vocabulary import assert_covered

    assert_covered(session.path)  # what it records, a seal can scope
    assert yaml.safe_load((session.path / "protocol.yaml").read_text())["settle"] == SettleRule().to_dict()
    assert a0["settle"] == {"settled": False, "reason": "no NVML readings: not settled"}
    assert "2 of 2 points did not settle" in md and "neither at equal clock nor sustained" in md
    assert a0["kernel_timed_halves_us"]["change_pct"] == 0.0  # 1000 + (i % 3) over calls 3..7: medians 1001, 1001


def test_driver_times_calls_and_writes_a_torch_profiler_trace(tmp_path):
    """The fallback path of the driver on the CPU: the timing record and the Chrome trace are written (a CPU run
    has no GPU kernels in it, so the trace holds none)."""
    shape = {"dtype": "bf16", "seq": 64, "causal": True, "batch": 1, "heads": 2, "kv_heads": 2, "head_dim": 128}
    r = run_module("softbench.trace.driver", "--backend", "sim", "--variant", "A1", "--shape", json.dumps(shape),
                   "--warmup", "2", "--calls", "3", "--out", str(tmp_path), "--torch-profiler")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""  # stdout stays free of library output
    rec = json.loads((tmp_path / "latency.json").read_text())
    assert rec["variant"] == "A1" and rec["calls"] == 3 and rec["warmup"] == 2
    assert rec["call_latency_us"] == pytest.approx(rec["window_ms"] / 3 * 1e3)
    assert rec["torch_profiler_calls"] == 3
    # no --settle: no settle step, so no settle calls among the traced ones (and no profiler range on the CPU)
    assert rec["settle"] is None and rec["settle_calls"] == 0 and rec["profiler_range"] is None
    assert ti.read_chrome_trace(tmp_path / "torch_trace.json").rows == []


class _SteppingBoard:
    """Readings as a board gives them after a load starts: 400 W at 1,800 MHz for the first second, then 690 W at
    1,480 MHz (the power cap). Each read is 0.125 s after the last (synthetic times, exact in binary: the settle rule
    reads only these)."""

    def __init__(self):
        self.reads = 0

    def read(self):
        from types import SimpleNamespace

        t = 0.125 * self.reads
        self.reads += 1
        capped = t >= 1.0
        return SimpleNamespace(time_s=t, power_w=690.0 if capped else 400.0, sm_clock_mhz=1480.0 if capped else 1800.0)


class _Counter:
    def __init__(self):
        self.calls = 0

    def __call__(self):
        self.calls += 1

    def sync(self):
        pass


def test_the_driver_settles_by_the_rule_before_its_traced_calls():
    """Spans of 1 s: at 2.75 s the earlier span (0.75, 1.75] still holds one reading from before the cap (power
    5% off), at 2.875 s both spans are at the cap: settled there, after 23 chunks of 20 calls (the first reading,
    at 0 s, only starts the clock)."""
    from softbench.trace.driver import SETTLE_CHUNK, _settle

    forward, board = _Counter(), _SteppingBoard()
    verdict = _settle(forward, forward, board, {"min_s": 2.0, "max_s": 15.0, "span_s": 1.0, "power_rel": 0.02,
                                                "clock_mhz": 15.0})
    assert verdict["settled"] and verdict["reason"] == "settled"
    assert verdict["elapsed_s"] == 2.875
    assert (verdict["power_w"], verdict["sm_clock_mhz"]) == (690.0, 1480.0)
    assert board.reads == 24 and forward.calls == verdict["calls"] == 23 * SETTLE_CHUNK


def test_the_driver_stops_settling_at_the_limit_and_says_so():
    from softbench.trace.driver import _settle

    forward = _Counter()
    verdict = _settle(forward, forward, _SteppingBoard(), {"min_s": 0.5, "max_s": 1.0})
    assert verdict["reason"] == "time limit" and verdict["elapsed_s"] == 1.0 and verdict["calls"] == 8 * 20
    assert _settle(forward, forward, None, {}) == {"settled": False, "reason": "no NVML readings: not settled"}


def test_a_traces_quantity_says_whether_every_point_settled():
    from softbench.trace.render import _settled, quantity

    rule = {"min_s": 2.0, "max_s": 15.0, "span_s": 1.0, "power_rel": 0.02, "clock_mhz": 15.0}
    ok = {"settled": True, "reason": "settled", "elapsed_s": 3.46}
    limit = {"settled": True, "reason": "time limit", "elapsed_s": 15.02}
    assert "at its own equilibrium under the power cap" in quantity({"settle": rule, "points": [{"settle": ok}] * 2})
    text = quantity({"settle": rule, "points": [{"settle": ok}, {"settle": limit}]})
    assert text.startswith("Settling was asked for, but 1 of 2 points") and "neither at equal clock" in text
    assert "neither at equal clock" in quantity({"points": [{}]})  # recorded before the settle step, or --no-settle
    swung = {"settle": ok, "kernel_timed_halves_us": {"change_pct": -6.9}}  # an H100's Gluon A0, settled
    steady = {"settle": ok, "kernel_timed_halves_us": {"change_pct": 1.9}}
    assert quantity({"settle": rule, "points": [swung, steady]}).endswith(
        "Even so the clock moved inside 1 of 2 timed windows (notes): their medians mix clocks.")
    assert "Even so" not in quantity({"settle": rule, "points": [steady, steady]})
    assert (_settled(ok), _settled(limit), _settled(None)) == ("3.5 s", "15.0 s (time limit)", "-")
    assert _settled({"settled": False, "reason": "no NVML readings: not settled"}) == "no readings"


def test_the_timed_window_is_sized_by_the_warm_ups_time_per_call():
    """Without --calls, as many calls as fill the window at the warm-up's pace: 50 warm-up calls in 22.5 ms are
    0.45 ms each (FA4's BF16 forward at causal 8K on an H100), so 2 s is 4,445 calls; never fewer than the paper's
    200 nor more than the window limit."""
    from softbench.core.protocol import MAX_WINDOW_CALLS
    from softbench.trace.driver import window_calls

    assert window_calls(None, 2.0, 22.5, 50) == (4445, "2 s at the warm-up's 0.45 ms per call")
    assert window_calls(None, 0.01, 22.5, 50)[0] == 200  # a short window still times the paper's 200 calls
    assert window_calls(None, 86400.0, 22.5, 50)[0] == MAX_WINDOW_CALLS
    assert window_calls(7, 2.0, 22.5, 50) == (7, "given")
    assert window_calls(None, 2.0, None, 0) == (200, "no warm-up to time: the minimum")
    # a warm-up too fast for the timer to see gives no pace to size by: the minimum, not a division by zero
    assert window_calls(None, 2.0, 0.0, 50) == (200, "no warm-up to time: the minimum")


def test_the_driver_sizes_its_window_when_no_count_is_given(tmp_path):
    shape = {"dtype": "bf16", "seq": 64, "causal": True, "batch": 1, "heads": 2, "kv_heads": 2, "head_dim": 64}
    r = run_module("softbench.trace.driver", "--backend", "sim", "--variant", "A0", "--shape", json.dumps(shape),
                   "--warmup", "3", "--window-s", "0.05", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    rec = json.loads((tmp_path / "latency.json").read_text())
    assert rec["calls"] >= 200 and rec["calls_sized_by"].startswith("0.05 s at the warm-up's")
    assert rec["call_latency_us"] == pytest.approx(rec["window_ms"] / rec["calls"] * 1e3)


def test_a_sized_window_is_described_with_each_points_count():
    from softbench.trace.render import _timed_words

    points = [{"calls": 4445}, {"calls": 4250}, {"calls": 4445}]
    assert _timed_words({"calls": None, "window_s": 2.0, "points": points}) == \
        "as many timed calls as fill 2 s (4250, 4445)"
    assert _timed_words({"calls": 200, "window_s": 2.0, "points": points}) == "200 timed calls"


def test_driver_reports_a_bad_variant_with_an_exit_code(tmp_path):
    r = run_module("softbench.trace.driver", "--backend", "sim", "--variant", "A9", "--shape", "{}",
                   "--out", str(tmp_path))
    assert r.returncode == 2 and "unknown kernel variant 'A9'" in r.stderr


def test_the_driver_is_given_the_backend_options(stand_in_trace):
    """TraceOptions.backend_options reach make_backend in the driver (--triton-config's configuration did not)."""
    points = sorted(stand_in_trace.path.glob("points/*/latency.json"))
    assert len(points) == 2
    assert all(json.loads(p.read_text())["info"]["rescale_threshold"] == 8.0 for p in points)


def test_a_non_numeric_cell_is_named_with_its_line_and_column(tmp_path):
    f = tmp_path / "k.csv"
    f.write_text("Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n"
                 "50.0,1000,10,100,100,90,110,5,kernel_a\n"
                 "50.0,1000,10,100,n/a,90,110,5,kernel_b\n")
    with pytest.raises(UsageError, match=r"line 3, column 'Med \(ns\)': 'n/a' is not a number"):
        ti.read_kern_sum_csv(f)


# --- damaged exports: one sentence naming the file, exit 2, never an internal error ---------------------------
KERN_SUM_HEADER = HEADERS["2024"]


@pytest.mark.parametrize("body, message", [
    ('50,1000,2,500,500,400,600,10,"k1\n', "not valid CSV, perhaps a truncated file"),  # quoted name cut at EOF
    ("50,1000,nan,500,500,400,600,10,k1\n", r"column 'Instances': 'nan' is not a finite number"),
    ("50,1000,inf,500,500,400,600,10,k1\n", r"column 'Instances': 'inf' is not a finite number"),
    ("50,1000,2,500,-5,400,600,10,k1\n", r"column 'Med \(ns\)': '-5' is negative"),
    ("50,1000,2.5,500,500,400,600,10,k1\n", r"'2.5' is not a whole number of instances"),
    ("50,1000,0,500,500,400,600,10,k1\n", r"column 'Instances': a kernel listed with 0 instances"),
])
def test_a_damaged_kern_sum_csv_is_refused(cli, tmp_path, body, message):
    f = tmp_path / "k.csv"
    f.write_text(KERN_SUM_HEADER + "\n" + body)
    with pytest.raises(UsageError, match=message):
        ti.read_kern_sum_csv(f)
    r = cli("trace", "ingest", str(f))
    assert r.returncode == 2 and str(f) in r.stderr and "internal error" not in r.stderr, r.stderr


@pytest.mark.parametrize("start, end, message", [
    (None, 1500, "not timestamps"), (1000, None, "not timestamps"), ("a", "b", "not timestamps"),
    (1500, 1000, "ends before it starts"),
])
def test_a_damaged_sqlite_export_is_refused(cli, tmp_path, start, end, message):
    f = tmp_path / "r.sqlite"
    _make_sqlite(f, KERNELS[:2], with_strings=False)
    con = sqlite3.connect(f)
    con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?)", (start, end, ATTN))
    con.commit()
    con.close()
    with pytest.raises(UsageError, match=message):
        ti.read_kernels_sqlite(f)
    r = cli("trace", "ingest", str(f))
    assert r.returncode == 2 and str(f) in r.stderr and "internal error" not in r.stderr, r.stderr


@pytest.mark.parametrize("doc, message", [
    (None, "not a Chrome trace.*found null"),
    (5, "not a Chrome trace.*found int"),
    ({"traceEvents": None}, "not a Chrome trace.*found null"),
    ({"traceEvents": [{"cat": "kernel", "name": "k", "ts": "1", "dur": 3},
                      {"cat": "kernel", "name": "k", "ts": 2, "dur": 3}]}, r"start time \(ts\) '1' that is not a number"),
    ({"traceEvents": [{"cat": "kernel", "name": "k", "ts": 1, "dur": -5}]}, "negative duration -5"),
    ({"traceEvents": [{"cat": "kernel", "name": None, "ts": 1, "dur": 5}]}, "has the name None, not a kernel's name"),
    ({"traceEvents": [{"cat": "kernel", "name": 7, "ts": 1, "dur": 5}]}, "has the name 7, not a kernel's name"),
    ({"traceEvents": [{"cat": "kernel", "name": "", "ts": 1, "dur": 5}]}, "has the name '', not a kernel's name"),
])
def test_a_damaged_chrome_trace_is_refused(cli, tmp_path, doc, message):
    f = tmp_path / "t.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(UsageError, match=message):
        ti.read_chrome_trace(f)
    r = cli("trace", "ingest", str(f))
    assert r.returncode == 2 and str(f) in r.stderr and "internal error" not in r.stderr, r.stderr


def test_a_chrome_traces_kernels_are_taken_in_start_order_with_a_sample_sd(tmp_path):
    events = [{"cat": "kernel", "name": "k", "ts": ts, "dur": dur} for ts, dur in ((30, 3), (10, 1), (20, 2))]
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": events}))
    (row,) = ti.read_chrome_trace(tmp_path / "t.json").rows
    assert row.durations_ns == [1000.0, 2000.0, 3000.0]  # microseconds to nanoseconds, by start
    assert (row.median_ns, row.std_ns) == (2000.0, 1000.0)


def test_a_trace_of_one_call_of_no_duration_reads_no_spread_and_no_share(tmp_path):
    """One instance has no sample sd (ddof=1 would give NaN): 0; a trace whose kernels took no time at all gives
    each a share of 0 %, not a division by zero."""
    events = [{"cat": "kernel", "name": "k", "ts": 10, "dur": 0}]
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": events}))
    (row,) = ti.read_chrome_trace(tmp_path / "t.json").rows
    assert (row.instances, row.total_ns, row.std_ns, row.time_pct) == (1, 0.0, 0.0, 0.0)


def test_a_kernel_of_no_duration_is_kept_and_one_that_ends_before_it_starts_refused(tmp_path):
    def export(name, rows):
        con = sqlite3.connect(tmp_path / name)
        con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (demangledName TEXT, start INTEGER, end INTEGER)")
        con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?)", rows)
        con.commit()
        con.close()
        return tmp_path / name

    (row,) = ti.read_kernels_sqlite(export("ok.sqlite", [("k", 100, 100), ("k", 200, 210)])).rows
    assert (row.instances, row.durations_ns, row.median_ns, row.min_ns) == (2, [0.0, 10.0], 5.0, 0.0)
    with pytest.raises(UsageError, match="ends before it starts"):
        ti.read_kernels_sqlite(export("bad.sqlite", [("k", 100, 90)]))


def test_a_dash_in_a_kern_sum_export_is_a_value_not_given(tmp_path):
    f = tmp_path / "kern_sum.csv"
    f.write_text('Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n'
                 '100.0,"1,500",1,1500,1500,1500,1500,-,"k"\n')
    (row,) = ti.read_kern_sum_csv(f).rows
    assert (row.total_ns, row.median_ns, row.std_ns) == (1500.0, 1500.0, None)


def test_a_negative_time_in_a_kern_sum_export_is_refused(tmp_path):
    f = tmp_path / "kern_sum.csv"
    f.write_text('Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n'
                 '100.0,-0.5,1,1,1,1,1,0,"k"\n')
    with pytest.raises(UsageError, match=r"line 2, column 'Total Time \(ns\)': '-0.5' is negative"):
        ti.read_kern_sum_csv(f)


def test_a_csv_without_total_time_is_no_kern_sum_export(tmp_path):
    f = tmp_path / "kern_sum.csv"
    f.write_text('Time (%),Instances,Med (ns),Name\n100.0,3,5,"k"\n')
    with pytest.raises(UsageError, match=r"no cuda_gpu_kern_sum header \(Name, Instances, Total Time\) found"):
        ti.read_kern_sum_csv(f)


def test_a_sqlite_export_names_kernels_by_their_demangled_names(tmp_path):
    con = sqlite3.connect(tmp_path / "t.sqlite")
    con.execute("CREATE TABLE StringIds (id INTEGER, value TEXT)")
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(1, "void attn_fwd<128>(Params)"), (2, "attn_fwd")])
    con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (shortName INTEGER, demangledName INTEGER, start INTEGER, "
                "end INTEGER)")
    con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (2, 1, 0, 10)")
    con.commit()
    con.close()
    assert [r.name for r in ti.read_kernels_sqlite(tmp_path / "t.sqlite").rows] == ["void attn_fwd<128>(Params)"]


def test_a_chrome_kernel_of_negative_duration_is_refused(tmp_path):
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": [{"cat": "kernel", "name": "k", "ts": 1,
                                                                  "dur": -0.5}]}))
    with pytest.raises(UsageError, match="kernel event 'k' has a negative duration -0.5"):
        ti.read_chrome_trace(tmp_path / "t.json")


# --- pinned by hand mutation testing (trace and settle rules at their edges) ----------------------------------
RECORDED_GLUON = Path(__file__).resolve().parents[1] / "sessions" / \
    "20261207T110153Z-trace-fp8-causal-8K-triton-A0-h15-folded"


def test_a_kernel_that_sped_up_inside_its_window_is_named_too():
    """The clock can rise inside the window as well as fall (Nsight's pause at the capture's start lets the board
    cool): the last 200 of 250 calls are 80 at 452 us then 120 at 400 us, so the first half's median is 452 us and
    the second's 400 us, a change of 100 (400 / 452 - 1) = -11.5%, beyond 2% either way."""
    p = _traced_point([452_000.0] * 130 + [400_000.0] * 120)
    halves = p["kernel_timed_halves_us"]
    assert (halves["first_half"], halves["second_half"]) == (pytest.approx(452.0), pytest.approx(400.0))
    [note] = p["notes"]
    assert "-11.5%" in note and "equal clock" in note


def test_more_kernel_instances_than_calls_are_noted():
    """Instances beyond settle + warm-up + timed calls (calls the driver did not count) leave the timed calls
    unknown: no timed-only median, and the count is named, as for too few."""
    p = _traced_point([450_000.0] * 300)
    assert p["kernel_median_timed_us"] is None and p["kernel_timed_halves_us"] is None
    assert p["notes"] == ["300 instances of the attention kernel, expected 250: no timed-calls-only median",
                          "attention kernel ran 300 times in the trace, expected 250"]


def test_a_torch_profiler_pass_of_the_wrong_length_names_only_the_count():
    """torch.profiler never gives a timed-calls-only median, so a pass of 19 kernels for 20 calls says only that
    the count differs, not that a timed-only median is missing."""
    p = _traced_point([300_000.0] * 19, warmup=5, calls=20, source="torch.profiler")
    assert p["kernel_timed_halves_us"] is None
    assert p["notes"] == ["attention kernel ran 19 times in the trace, expected 20"]


def test_the_non_kernel_share_reads_the_median_over_all_calls():
    """non_kernel_pct pairs the all-calls median (Table B4's kernel column) with the call latency, not the timed
    calls' median: here 400 us over all 250 calls (130 of them at 400 us), 452 us over the timed ones, 460 us a
    call."""
    p = _traced_point([400_000.0] * 130 + [452_000.0] * 120)
    assert p["kernel_median_us"] == pytest.approx(400.0) and p["kernel_median_timed_us"] == pytest.approx(452.0)
    assert p["non_kernel_pct"] == pytest.approx(100 - 100 * 400 / 460)


def test_a_recorded_settled_point_expects_its_settle_warm_up_and_timed_calls():
    """The H100's points of 20261207T110153Z, from their own CSV and latency.json: A0 traced 9,180 settle + 50
    warm-up + 6,551 timed = 15,781 kernels, exactly the CSV's instances, so no count note; the h15-folded form's
    key norms (2.3% of its GPU time) are named. Without the SQLite export there is no timed-only median."""
    from softbench.core.shapes import Shape
    from softbench.trace.engine import TraceOptions, _point_record

    for variant, other_notes in (("A0", []), ("h15-folded", ["_key_norm_max (2.3%)"])):
        pdir = RECORDED_GLUON / "points" / f"fp8-8K-causal-b1h16d128-{variant}"
        latency = json.loads((pdir / "latency.json").read_text())
        table = ti.read_kern_sum_csv(pdir / "kern_cuda_gpu_kern_sum.csv")
        shape = Shape(**latency["shape"])
        opts = TraceOptions(shapes=(shape,), variants=("A0", "h15-folded"), backend="triton", warmup=50, nsys="nsys")
        assert table.dominant().instances == latency["settle_calls"] + 50 + latency["calls"]
        p = _point_record(opts, shape, variant, "nsys", table, None, latency, [])
        assert len(p["notes"]) == len(other_notes)
        for note, named in zip(p["notes"], other_notes):
            assert note.startswith(f"besides the attention kernel, {variant}'s calls ran {named}")
        assert p["kernel_median_timed_us"] is None
        assert p["kernel_median_scope"] == "all traced calls (settle, warm-up and timed calls)"
        assert p["non_kernel_pct"] == pytest.approx(100 - 100 * p["kernel_median_us"] / latency["call_latency_us"])


def test_a_kernel_at_exactly_the_note_share_is_named_and_one_below_is_not():
    """OTHER_KERNEL_NOTE_PCT is 'at this share or more': 1,000 ns of 200,000 is 0.5% (named), 1,000 of 250,000 is
    0.4% (not); every other kernel at or above it is named, largest first."""
    from softbench.core.shapes import Shape
    from softbench.trace.engine import TraceOptions, _point_record

    attn = ti.KernelRow(name="attn", instances=1, total_ns=199_000.0, median_ns=199_000.0)
    other = ti.KernelRow(name="norms", instances=1, total_ns=1_000.0, median_ns=1_000.0)
    assert _beside(ti.KernelTable("nsys", "-", [attn, other]), attn) == [("norms", 0.5)]
    attn = ti.KernelRow(name="attn", instances=1, total_ns=249_000.0, median_ns=249_000.0)
    assert _beside(ti.KernelTable("nsys", "-", [attn, other]), attn) == []
    fill = ti.KernelRow(name="fill", instances=1, total_ns=3_000.0, median_ns=3_000.0)
    table = ti.KernelTable("nsys", "-", [attn, other, fill])  # 253,000 ns in all
    assert [n for n, _ in _beside(table, attn)] == ["fill"]  # 1.19%; norms 0.395%
    big = ti.KernelRow(name="norms", instances=1, total_ns=5_000.0, median_ns=5_000.0)
    row = ti.KernelRow(name="attn", instances=250, total_ns=190_000.0, median_ns=760.0, durations_ns=[760.0] * 250)
    table = ti.KernelTable("nsys", "-", [row, big, fill])  # 198,000 ns: norms 2.5%, fill 1.5%
    opts = TraceOptions(shapes=(Shape(seq=8192),), warmup=50, calls=200, nsys="nsys")
    p = _point_record(opts, opts.shapes[0], "A1", "nsys", table, table,
                      {"call_latency_us": 800.0, "warmup": 50, "calls": 200}, [])
    [note] = p["notes"]
    assert "ran norms (2.5%), fill (1.5%) of the trace's GPU time" in note


def test_a_trace_of_kernels_that_took_no_time_names_no_other_kernel(tmp_path):
    """A Chrome trace whose kernels all last 0 us has no GPU time to share out: no other kernel, no division."""
    events = [{"cat": "kernel", "name": n, "ts": ts, "dur": 0} for n, ts in (("a", 1), ("b", 2), ("a", 3))]
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": events}))
    t = ti.read_chrome_trace(tmp_path / "t.json")
    assert _beside(t, t.dominant()) == []


def test_the_halves_of_four_calls_and_an_odd_middle_call():
    """Four durations are enough for two halves of two; with five, the middle call is in neither half (the second
    half is the last two: 20 and 30, median 25, not 30 with the middle 50 in it)."""
    d = halves_drift([10.0, 10.0, 20.0, 20.0])
    assert (d["first_half"], d["second_half"], d["change_pct"]) == (10.0, 20.0, 100.0)
    d = halves_drift([10.0, 10.0, 50.0, 20.0, 30.0])
    assert (d["first_half"], d["second_half"]) == (10.0, 25.0)


def test_b4_rows_give_no_timed_speed_up_where_one_side_lacks_its_timed_median():
    """The timed column needs both kernels' timed-only medians (the SQLite export of one may be missing)."""
    base = {"seq": 8192, "causal": True, "variant": "A0", "kernel_median_us": 200.0, "call_latency_us": 202.0,
            "kernel_median_timed_us": 199.0}
    var = {"seq": 8192, "causal": True, "variant": "A1", "kernel_median_us": 160.0, "call_latency_us": 170.0,
           "kernel_median_timed_us": None}
    (row,) = b4_rows([base, var], "A0")
    assert row["kernel_only_speedup_pct"] == pytest.approx(25.0) and row["kernel_only_speedup_timed_pct"] is None
    (row,) = b4_rows([{**base, "kernel_median_timed_us": None}, {**var, "kernel_median_timed_us": 159.2}], "A0")
    assert row["kernel_only_speedup_timed_pct"] is None


def test_trace_options_refuse_no_calls_a_negative_warm_up_and_an_empty_window():
    from softbench.core.shapes import Shape
    from softbench.trace.engine import TraceOptions

    shapes = (Shape(seq=8192),)
    for bad in ({"calls": 0}, {"warmup": -1}, {"window_s": 0.0}, {"window_s": -2.0}, {"window_s": float("nan")},
                {"window_s": float("inf")}):
        with pytest.raises(UsageError, match="must be positive"):
            TraceOptions(shapes=shapes, **bad)
    assert TraceOptions(shapes=shapes, calls=1, warmup=0, window_s=0.001).calls == 1


def test_trace_options_record_the_settle_rule_that_runs():
    """An empty rule is the default rule (what the driver runs), filled in so the session records and describes it;
    a partial one keeps its own values beside the defaults; an unknown key or impossible bounds are refused."""
    from softbench.core.shapes import Shape
    from softbench.runtime.settle import SettleRule
    from softbench.trace.engine import TraceOptions

    shapes = (Shape(seq=8192),)
    assert TraceOptions(shapes=shapes, settle={}).settle == SettleRule().to_dict()
    assert TraceOptions(shapes=shapes, settle={"max_s": 30.0}).settle == {**SettleRule().to_dict(), "max_s": 30.0}
    assert TraceOptions(shapes=shapes, settle=None).settle is None
    with pytest.raises(UsageError, match="unknown key min_power"):
        TraceOptions(shapes=shapes, settle={"min_power": 1.0})
    with pytest.raises(UsageError, match="min_s <= max_s"):
        TraceOptions(shapes=shapes, settle={"min_s": 5.0, "max_s": 1.0})


def test_a_trace_with_no_points_names_no_quantity():
    """A session that failed before its first point has no speed-up: its summary says so, not that kernels settled."""
    from softbench.runtime.settle import SettleRule
    from softbench.trace.render import quantity

    assert quantity({"points": [], "settle": SettleRule().to_dict()}) == \
        "No point was traced, so there is no speed-up to name."


def test_a_recorded_trace_describes_its_settle_rule_and_each_points_window():
    """summary.md's per-process line from the rule the H100 session recorded (power_rel 0.02, clock_mhz 15,
    span_s 1, 2-15 s) and its points' sized windows, in ascending order."""
    from softbench.trace.render import _timed_words, point_rows, trace_markdown

    summary = json.loads((RECORDED_GLUON / "summary.json").read_text())
    md = trace_markdown(summary, RECORDED_GLUON.name)
    assert ("- per process: calls until power moved by at most 2% and the SM clock by at most 15 MHz between two "
            "1 s spans (2-15 s), then 50 warm-up + as many timed calls as fill 2 s (6333, 6551); ") in md
    # each point's settle step in its row: 3.12 s and 3.00 s, both ended by the rule (no reason in brackets)
    assert [row[5] for row in point_rows(summary)] == ["3.1 s", "3.0 s"]
    # a set of counts iterates in hash order, which for these two is not ascending
    assert _timed_words({"calls": None, "window_s": 2.0, "points": [{"calls": 4448}, {"calls": 4445}]}) == \
        "as many timed calls as fill 2 s (4445, 4448)"


def test_a_points_notes_are_listed_under_the_trace_with_its_shape_and_variant():
    from softbench.trace.render import trace_markdown

    summary = json.loads((RECORDED_GLUON / "summary.json").read_text())
    summary["points"][1]["notes"] = ["besides the attention kernel, h15-folded's calls ran _key_norm_max (2.3%)"]
    md = trace_markdown(summary, "t")
    assert "\nNotes:\n- fp8-8K-causal-b1h16d128 h15-folded: besides the attention kernel, h15-folded's calls ran " \
           "_key_norm_max (2.3%)\n" in md
    assert "Notes:" not in trace_markdown(json.loads((RECORDED_GLUON / "summary.json").read_text()), "t")


def test_an_ingested_tables_rows_are_in_microseconds_and_milliseconds():
    """kernel_rows from the H100's CSV of h15-folded: Med 299,237 ns is 299.237 us, Total 4,734,279,390 ns is
    4,734.279 ms; largest total first."""
    from softbench.trace.render import kernel_rows

    t = ti.read_kern_sum_csv(RECORDED_GLUON / "points" / "fp8-8K-causal-b1h16d128-h15-folded" /
                             "kern_cuda_gpu_kern_sum.csv")
    assert kernel_rows(t) == [["15763", "299.237", "4734.279", "97.7", "_attn_fwd_ws"],
                              ["15763", "7.168", "113.762", "2.3", "_key_norm_max"]]


def _capture_trace_options(monkeypatch, args, nsys_found="/opt/nvidia/nsight-systems/2025.3.1/bin/nsys"):
    """Run `trace run` up to the engine on a stand-in CUDA device; return the options it would trace with."""
    from click.testing import CliRunner

    import softbench.kernels.capability as cap
    import softbench.trace.engine as en
    from softbench.trace import command as trace_command

    seen = {}

    def fake_run(opts, progress=None):
        seen["opts"] = opts
        raise KeyboardInterrupt  # stop before anything is traced

    monkeypatch.setattr(en, "run_trace", fake_run)
    monkeypatch.setattr(en, "find_nsys", lambda: nsys_found)
    monkeypatch.setattr(cap, "detect_device", lambda prefer_cuda=True: cap.Device("cuda", "gpu", 90))
    result = CliRunner().invoke(trace_command.command, ["run", "--backend", "sim", "--seq", "128", *args])
    return seen.get("opts"), result


def test_trace_run_passes_its_options_to_the_engine(monkeypatch, tmp_path):
    from softbench.runtime.settle import SettleRule

    opts, _ = _capture_trace_options(monkeypatch, ["--out", str(tmp_path)])
    assert opts.settle == SettleRule().to_dict() and opts.calls is None and opts.window_s == 2.0
    assert opts.warmup == 50 and opts.nsys == "/opt/nvidia/nsight-systems/2025.3.1/bin/nsys"
    opts, _ = _capture_trace_options(monkeypatch, ["--out", str(tmp_path), "--no-settle", "--window-s", "0.5",
                                                   "--calls", "300", "--warmup", "0", "--no-nsys"])
    assert opts.settle is None and opts.window_s == 0.5 and opts.calls == 300 and opts.warmup == 0
    assert opts.nsys is None  # --no-nsys: torch.profiler even where Nsight Systems is found
