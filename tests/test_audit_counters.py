"""The audit's counters through NVIDIA's reader: the counter table, reader discovery and choice, the CSV
fallback, the cross-check, the nsight-python collector's refusal. No GPU needed.

The reader tests read a real report (tests/data/audit/h200, recorded on the H200 by ncu 2025.3.1) through
the ncu-report package; they are skipped where that package is not installed (pip install ncu-report==2025.3.1).
Nothing here stands in for ncu_report's API: the "host" install below is made of the package's own files in
the layout Nsight Compute ships (extras/python/ncu_report.py)."""

import importlib.metadata
import importlib.util
import shutil
import stat
from pathlib import Path

import pytest

import test_audit as audit_tests
from softbench.audit import collectors, counters, ncu, readers
from softbench.audit.render import counter_notes
from softbench.audit.engine import AuditOptions, run_audit
from softbench.audit.nsight_driver import nsight_settings, report_path
from softbench.core.errors import UnsupportedError, UsageError
from softbench.core.shapes import Shape

DATA = Path(__file__).parent / "data" / "audit"
H200 = DATA / "h200"
KERNEL_RX = "FlashAttentionForwardSm"


def _has_package() -> bool:
    try:
        importlib.metadata.version("ncu-report")
    except importlib.metadata.PackageNotFoundError:
        return False
    return importlib.util.find_spec("ncu_report") is not None


needs_package = pytest.mark.skipif(not _has_package(), reason="the ncu-report package is not installed")


def _csv_frame(path: Path):
    return counters.frame_from_kernels(ncu.parse_csv(path.read_text()))


# --- the table and the comparison (pure) ---------------------------------------------------------------

def test_csv_fallback_table_keeps_what_ncu_printed():
    frame = _csv_frame(DATA / "ncu-A0.csv")
    assert list(frame.columns) == list(counters.COLUMNS)
    row = frame[(frame.launch == 1) & (frame.metric == "smsp__inst_executed.sum")].iloc[0]
    assert (row.value, row.unit, row.text) == (130_100_000.0, "inst", "130,100,000")
    assert set(frame.launch) == {0, 1}  # the torch fill kernel and the attention kernel


def test_compare_reads_the_precision_the_csv_printed():
    csv = _csv_frame(DATA / "ncu-A0.csv")
    exact = csv.copy()
    exact["text"] = None
    metric = "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"  # printed 40.30
    finer = exact.copy()
    finer.loc[finer.metric == metric, "value"] = [0.0, 40.304]
    assert counters.compare(finer, csv, [metric])["equal"]  # 40.304 printed to 2 decimals is 40.30
    off = finer.copy()
    off.loc[(off.metric == metric) & (off.launch == 1), "value"] = 40.306
    got = counters.compare(off, csv, [metric])
    assert not got["equal"] and got["differences"][0]["why"] == "value differs"
    # two readers of the binary report: no printed text, so exactly equal or not
    assert not counters.compare(finer, exact, [metric])["equal"]
    unit = exact.copy()
    unit.loc[unit.metric == "gpu__time_duration.sum", "unit"] = "usecond"
    assert "unit" in counters.compare(exact, unit, ["gpu__time_duration.sum"])["differences"][0]["why"]
    missing = exact[exact.metric != metric]
    assert counters.compare(exact, missing, [metric])["differences"][0]["why"] == "missing"
    blank = exact.copy()  # the row is there, its value is not (a metric one reader could not evaluate)
    blank.loc[blank.metric == metric, "value"] = None
    assert counters.compare(exact, blank, [metric])["differences"][0]["why"] == "value present in one reader only"
    assert not counters.compare(exact, exact, ["no_such_metric"])["equal"]  # nothing compared is not "equal"


def test_frame_round_trips_through_the_session_file(tmp_path):
    frame = _csv_frame(DATA / "ncu-A1.csv")
    frame["value"] = frame["value"] / 3.0  # values no decimal print holds exactly
    readers.write_frame(frame, tmp_path / "t.csv")
    back = readers.load_frame(tmp_path / "t.csv")
    assert counters.compare(frame, back, sorted(set(frame.metric)))["equal"]


def test_nsight_python_frame_takes_launch_and_unit_from_the_primary():
    import pandas as pd

    primary = _csv_frame(DATA / "ncu-A0.csv")
    name = primary[primary.launch == 1].kernel.iloc[0]
    df = pd.DataFrame({"Kernel": [name, name], "Metric": ["gpu__time_duration.sum", "smsp__inst_executed.sum"],
                       "AvgValue": [403488.0, 130_100_000.0]})
    got = counters.frame_from_nsight(df, primary)
    assert list(got.launch) == [1, 1] and list(got.unit) == ["nsecond", "inst"]
    assert counters.compare(primary[primary.launch == 1], got, list(df.Metric))["equal"]


def test_the_csv_launches_come_back_from_their_table_with_the_same_quantities():
    """The table as launches again (what the engine reduces when a binary reader read the report): the same
    numbers and units. ncu's CSV holds Block Size and Grid Size as columns, not as launch__*_dim_* metrics, so a
    launch rebuilt from its table has none to print rather than a made-up one."""
    kernels = ncu.parse_csv((DATA / "ncu-A0.csv").read_text())
    back = counters.kernels_from_frame(counters.frame_from_kernels(kernels))
    assert [k.kernel_name for k in back] == [k.kernel_name for k in kernels]
    for k, b in zip(kernels, back):
        direct, rebuilt = ncu.quantities(k)[0], ncu.quantities(b)[0]
        assert "block_size" not in rebuilt and "grid_size" not in rebuilt
        assert rebuilt == {q: v for q, v in direct.items() if q not in ("block_size", "grid_size")}


def test_two_binary_readers_agree_up_to_a_doubles_last_bit():
    """No printed text on either side: equal means equal up to the rounding of the last bit of a double (0.1 + 0.2
    is 0.30000000000000004), not any closer, and not as loosely as a printed number's last digit."""
    exact = _csv_frame(DATA / "ncu-A0.csv")
    exact["text"] = None
    metric = "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"
    a, b = exact.copy(), exact.copy()
    a.loc[a.metric == metric, "value"] = 0.1 + 0.2
    b.loc[b.metric == metric, "value"] = 0.3
    assert counters.compare(a, b, [metric])["equal"]
    b.loc[b.metric == metric, "value"] = 0.3 + 1e-6
    assert not counters.compare(a, b, [metric])["equal"]


# --- NVIDIA's reader on a real report ------------------------------------------------------------------

@needs_package
def test_ncu_report_reads_the_h200_report_equal_to_the_csv_parser(tmp_path):
    import pandas as pd

    reader = readers.package_reader()
    assert reader is not None and reader.name == "ncu-report"
    report = tmp_path / "A0.ncu-rep"
    shutil.copyfile(H200 / "A0.ncu-rep", report)
    reading = readers.read(reader, report, tmp_path, "A0")
    assert reading.artifact == "A0.ncu-report.csv" and (tmp_path / "A0.ncu-report.csv").is_file()
    csv = _csv_frame(H200 / "A0.csv")
    every = sorted(set(reading.frame.metric))
    assert len(every) == 322
    # a metric whose value is text keeps it as text, with no number
    name = reading.frame[reading.frame.metric == "device__attribute_display_name"].iloc[0]
    assert name.text == "NVIDIA H200" and pd.isna(name.value)
    check = counters.compare(reading.frame, csv, every)
    assert check["equal"] and check["compared"] == 322, check["differences"]
    q, _ = ncu.quantities(ncu.pick_kernel(reading.kernels, KERNEL_RX))
    q_csv, _ = ncu.quantities(ncu.pick_kernel(ncu.parse_csv((H200 / "A0.csv").read_text()), KERNEL_RX))
    assert q["mufu_pipe_pct"] == pytest.approx(40.3199268, abs=1e-6) and q_csv["mufu_pipe_pct"] == 40.32
    assert (q["instructions"], q["registers_per_thread"], q["duration_us"]) == (130143192, 168, 404.224)
    assert (q["block_size"], q["grid_size"]) == (q_csv["block_size"], q_csv["grid_size"]) == ("(384, 1, 1)",
                                                                                             "(1024, 1, 1)")
    for key, value in q_csv.items():
        if isinstance(value, float):
            assert q[key] == pytest.approx(value, abs=0.005 + 1e-9 * abs(value)), key


def _host_install(root: Path) -> Path:
    """An Nsight Compute install's layout (bin launcher in a CUDA toolkit, nsight-compute-<version>/ beside it
    with extras/python/ncu_report.py) made of the ncu-report package's own files."""
    package = Path(importlib.util.find_spec("ncu_report").origin).parent
    install = root / "cuda" / "nsight-compute-2025.3.1"
    extras = install / "extras" / "python"
    extras.mkdir(parents=True)
    shutil.copyfile(package / "__init__.py", extras / "ncu_report.py")
    for lib in package.glob("*.so"):
        shutil.copyfile(lib, extras / lib.name)
    (root / "cuda" / "bin").mkdir()
    launcher = root / "cuda" / "bin" / "ncu"
    launcher.write_text(f'#!/bin/sh\nexec "{install}/ncu" "$@"\n')
    launcher.chmod(launcher.stat().st_mode | stat.S_IXUSR)
    return launcher


@needs_package
def test_host_module_found_from_ncu_and_read_in_its_own_process(tmp_path):
    launcher = _host_install(tmp_path)
    host = readers.host_reader(str(launcher), "Version 2025.3.1.0 (build 36398880) (public-release)")
    assert host is not None and host.version == "2025.3.1" and host.location.endswith("extras/python")
    report = tmp_path / "A0.ncu-rep"
    shutil.copyfile(H200 / "A0.ncu-rep", report)
    reading = readers.read(host, report, tmp_path, "A0")
    package = readers.read(readers.package_reader(), report, tmp_path, "A0")
    every = sorted(set(package.frame.metric))
    assert counters.compare(package.frame, reading.frame, every)["equal"]  # exactly, no printed precision


def test_of_several_installs_the_one_of_ncus_version_is_read_else_the_newest(tmp_path):
    cuda = tmp_path / "cuda"
    for version in ("2024.3.0", "2025.3.1"):
        extras = cuda / f"nsight-compute-{version}" / "extras" / "python"
        extras.mkdir(parents=True)
        (extras / "ncu_report.py").write_text("")  # found by its name; nothing here imports it
    (cuda / "bin").mkdir()
    ncu_path = cuda / "bin" / "ncu"
    ncu_path.write_text("#!/bin/sh\n")
    older = readers.host_reader(str(ncu_path), "Version 2024.3.0.0 (build 1) (public-release)")
    assert (older.version, Path(older.location).parents[1].name) == ("2024.3.0", "nsight-compute-2024.3.0")
    unknown = readers.host_reader(str(ncu_path), None)  # ncu did not say its version
    assert Path(unknown.location).parents[1].name == "nsight-compute-2025.3.1"


@needs_package
def test_a_host_folder_without_ncu_report_is_not_read_by_the_package_instead(tmp_path):
    """The reader process imports ncu_report from the folder it was given; a folder without it would let the
    package's copy answer under the host's name, so it is refused (exit 5, one line) and nothing is written."""
    import subprocess
    import sys

    out = tmp_path / "A0.host.csv"
    r = subprocess.run([sys.executable, "-m", "softbench.audit.read_report", str(tmp_path), str(H200 / "A0.ncu-rep"),
                        str(out)], capture_output=True, text=True, timeout=120, env=readers._child_env())
    assert r.returncode == 5 and r.stderr.strip().endswith(f"not from {tmp_path}"), r.stderr
    assert not out.exists()


def test_no_host_module_where_the_install_has_none(tmp_path):
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "ncu"
    fake.write_text("#!/bin/sh\n")
    assert readers.host_reader(str(fake), "Version 2025.3.1.0") is None
    # ncu itself is still the CSV reader, recorded with the version ncu gave
    assert readers.available(str(fake), "Version 2025.3.1.0")[-1] == readers.Reader("csv", "2025.3.1", str(fake))
    assert readers.host_reader(None) is None


def test_a_reader_that_cannot_read_says_why(tmp_path):
    report = tmp_path / "A0.ncu-rep"
    report.write_text("not a report")
    module = tmp_path / "extras"
    module.mkdir()
    (module / "ncu_report.py").write_text("def load_report(path):\n    raise RuntimeError('unsupported version')\n")
    from softbench.core.errors import MeasurementError

    with pytest.raises(MeasurementError, match="could not read A0.ncu-rep: RuntimeError: unsupported version"):
        readers.read(readers.Reader("host", None, str(module)), report, tmp_path, "A0")


# --- choosing a reader ------------------------------------------------------------------------------------

PKG, HOST, CSV = (readers.Reader("ncu-report", "2025.3.1", "/p"), readers.Reader("host", "2025.3.1", "/h"),
                  readers.Reader("csv", "2025.3.1", "/usr/local/cuda/bin/ncu"))


def test_choose_auto_is_best_first_and_a_named_reader_goes_first():
    assert [r.name for r in readers.choose("auto", [PKG, HOST, CSV])] == ["ncu-report", "host", "csv"]
    assert [r.name for r in readers.choose("host", [PKG, HOST, CSV])] == ["host", "ncu-report", "csv"]
    assert readers.choose("auto", [CSV]) == [CSV]


def test_a_named_reader_that_is_missing_is_refused():
    with pytest.raises(UnsupportedError, match=r"--counter-reader ncu-report: .*readers found: host, csv") as e:
        readers.choose("ncu-report", [HOST, CSV])
    assert "pip install ncu-report==2025.3.1" in e.value.hint
    with pytest.raises(UnsupportedError, match="host is not available"):
        readers.choose("host", [CSV])


def test_unknown_collector_or_reader_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown collector 'nvprof'"):
        AuditOptions(shapes=(Shape(),), collector="nvprof")
    with pytest.raises(UsageError, match="unknown counter reader"):
        AuditOptions(shapes=(Shape(),), counter_reader="regex")


# --- nsight-python ----------------------------------------------------------------------------------------

NCU_2025 = "NVIDIA (R) Nsight Compute Command Line Profiler\nVersion 2025.3.1.0 (build 36398880) (public-release)"


def test_nsight_python_refusal_names_the_versions():
    why = collectors.nsight_python_refusal("1.1.0", NCU_2025)
    assert "nsight-python 1.1.0 needs Nsight Compute 2026.2.1 or newer" in why
    assert "this ncu is 2025.3.1" in why and "nsight-python==0.9.6" in why and "--collector ncu" in why
    assert collectors.nsight_python_refusal("1.0.0", NCU_2025) is not None
    assert collectors.nsight_python_refusal("0.9.6", NCU_2025) is None
    assert collectors.nsight_python_refusal("1.1.0", "Version 2026.2.1.0") is None
    assert "not installed" in collectors.nsight_python_refusal(None, NCU_2025)
    assert "version is unknown" in collectors.nsight_python_refusal("0.9.6", "")


def test_nsight_driver_profiles_as_the_ncu_collector_does():
    req = {"metrics": list(ncu.ALL_METRICS), "output_prefix": "/s/ncu/A0-nsight-"}
    s = nsight_settings(req)
    assert (s["clock_control"], s["cache_control"], s["replay_mode"], s["runs"]) == ("none", "all", "kernel", 1)
    assert s["thermal_mode"] == "off" and s["metrics"] == list(ncu.ALL_METRICS)
    assert str(report_path(req)) == "/s/ncu/A0-nsight-ncu-output-attention_forward-0.ncu-rep"


# --- the engine with stand-in tools ----------------------------------------------------------------------

# the stand-in ncu, cuobjdump and driver of tests/test_audit.py (one place for the fixture)
fake_tools = audit_tests.fake_tools


def _opts(tmp_path, bin_dir, **kw) -> AuditOptions:
    return audit_tests._opts(tmp_path, bin_dir, **{"variants": ("A0",), **kw})


def test_engine_records_which_reader_read_the_counters(tmp_path, fake_tools, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "real")
    (s,) = run_audit(_opts(tmp_path, fake_tools))
    summary = s.read_json("summary.json")
    reader = summary["counter_reader"]["A0"]
    expect = "ncu-report" if _has_package() else "csv"
    assert reader["name"] == expect and summary["errors"] == {}
    checks = summary["counter_check"]["A0"]
    if expect == "ncu-report":
        # the recorded report (2026-12-01) predates the warp-stall metrics, the L2, DRAM and SM-balance ones
        # (2026-12-03) and the tensor pipe's (2026-12-04): every other metric asked is compared
        later = {"lts__t_sector_hit_rate.pct", "dram__bytes_read.sum", "sm__cycles_active.avg",
                 "sm__cycles_active.max", "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
                 "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
                 "sm__inst_executed_pipe_tensor_op_gmma.sum"}
        recorded = [m for m in ncu.ALL_METRICS if "_issue_stalled_" not in m and m not in later]
        assert checks["csv"]["equal"] and checks["csv"]["compared"] == len(recorded)
        assert set(checks) == {"csv"}  # the other readers are checked against the primary, not the primary itself
        assert reader["table"] == "ncu/A0.ncu-report.csv" and (s.path / reader["table"]).is_file()
    else:
        assert checks == {}
    assert summary["ncu"]["A0"]["instructions"] == 130143192 and (s.path / "ncu" / "A0.csv").is_file()
    protocol = (s.path / "protocol.yaml").read_text()
    assert "collector: ncu" in protocol and "counter_reader: auto" in protocol
    assert s.read_json("env.json")["collector"]["name"] == "ncu"
    (line,) = counter_notes(summary)
    assert line.startswith(f"counters [A0]: read by {expect}")


def test_engine_csv_reader_on_request(tmp_path, fake_tools, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "real")
    (s,) = run_audit(_opts(tmp_path, fake_tools, counter_reader="csv"))
    summary = s.read_json("summary.json")
    assert summary["counter_reader"]["A0"]["name"] == "csv"
    assert summary["ncu"]["A0"]["mufu_pipe_pct"] == 40.32  # the CSV's two decimals
    if _has_package():
        assert summary["counter_check"]["A0"]["ncu-report"]["equal"]


def test_engine_falls_back_when_no_reader_of_the_binary_report_can_read_it(tmp_path, fake_tools):
    (s,) = run_audit(_opts(tmp_path, fake_tools))  # the stand-in's report is JSON, not a report
    summary = s.read_json("summary.json")
    assert summary["counter_reader"]["A0"]["name"] == "csv" and summary["ncu"]["A0"]["mufu_pipe_pct"] == 40.3
    if _has_package():
        assert "could not read A0.ncu-rep" in summary["counter_reader_failures"]["A0"]["ncu-report"]


def test_engine_imports_the_csv_again_from_an_ncu_without_print_units(tmp_path, fake_tools, monkeypatch):
    """An ncu older than --print-units refuses the option: the CSV is imported again without it (in ncu's own
    units, which the parser converts)."""
    monkeypatch.setenv("FAKE_NCU_MODE", "nounits")
    (s,) = run_audit(_opts(tmp_path, fake_tools, counter_reader="csv"))
    summary = s.read_json("summary.json")
    assert summary["errors"] == {} and summary["counter_reader"]["A0"]["name"] == "csv"
    assert summary["ncu"]["A0"]["mufu_pipe_pct"] == 40.3


def test_engine_refuses_nsight_python_before_any_session(tmp_path, fake_tools, monkeypatch):
    monkeypatch.setattr(collectors, "installed_nsight_python", lambda: "1.1.0")
    with pytest.raises(UnsupportedError, match="nsight-python 1.1.0 needs Nsight Compute 2026.2.1.*is 2025.3.1"):
        run_audit(_opts(tmp_path, fake_tools, collector="nsight-python"))
    assert not (tmp_path / "sessions").exists()
    # --no-ncu asks nothing of the collector
    (s,) = run_audit(_opts(tmp_path, fake_tools, collector="nsight-python", use_ncu=False))
    assert s.read_json("summary.json")["collector"] is None


def test_cli_refusal_is_one_sentence_without_traceback(tmp_path, fake_tools, cli):
    r = cli("audit", "--counter-reader", "regex")
    assert r.returncode == 2 and "Traceback" not in r.stderr and "regex" in r.stderr


def test_a_cutlass_launch_read_by_its_function_and_by_its_signature_is_one_launch():
    """FA3's forward on the H200: ncu's CSV names it by its demangled signature, the Nsight Compute install's
    ncu_report by its function (device_kernel). The same launch, the same 37 values: the comparison says equal
    (it said 'kernel name differs' on every metric before); a different kernel still differs."""
    csv = _csv_frame(DATA / "h200" / "ref-fa3.csv")
    host = readers.load_frame(DATA / "h200" / "ref-fa3.host.csv")
    assert set(host.kernel) == {"device_kernel"} and set(csv.kernel) != set(host.kernel)
    asked = [m for m in ncu.ALL_METRICS if m in set(csv.metric)]
    result = counters.compare(host, csv, asked)
    assert result["equal"] and result["compared"] == len(asked) == 37, result["differences"][:2]
    assert counters.same_kernel("device_kernel", "void device_kernel<enable_sm90_or_later<X>>(X::Params)")
    assert counters.same_kernel("_attn_fwd_ws", "_attn_fwd_ws")
    assert not counters.same_kernel("device_kernel", "void other_kernel<device_kernel<X>>(int)")
    assert not counters.same_kernel("fwd", "void fwd_kernel<X>(int)")
    renamed = csv.copy()
    renamed["kernel"] = "void other_kernel<X>(int)"
    differs = counters.compare(host, renamed, asked)
    assert not differs["equal"] and differs["compared"] == 37
    assert len(differs["differences"]) == 20  # the first 20 of the 37 differences are kept
    summary = {"counter_reader": {"A0": {"name": "host", "version": "2025.3.1"}},
               "counter_check": {"A0": {"csv": differs}}}
    assert counter_notes(summary) == ["counters [A0]: read by host 2025.3.1; csv DIFFERS on 37 metrics"]
    # the other spellings of a function's name in its signature: with its namespace, without a return type, a
    # plain function
    assert counters.same_kernel("device_kernel", "void cutlass::device_kernel<X>(X::Params)")
    assert counters.same_kernel("device_kernel", "device_kernel<X>(X::Params)")
    assert counters.same_kernel("_attn_fwd_ws", "void _attn_fwd_ws(float *, int)")
    assert counters.same_kernel("_attn_fwd_ws", "_attn_fwd_ws(float *, int)")
