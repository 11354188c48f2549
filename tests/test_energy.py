"""Energy per forward: trimming and arithmetic on hand-made sample streams, the counter method, the power
sampler, the refusals, and the engine end to end with a replayed power source and a CPU worker."""

import itertools
import json
import re
import time

import pytest

from softbench.core.errors import MeasurementError, UnsupportedError, UsageError
from softbench.energy import summary as es
from softbench.core.nvml import GpuReading, PowerSampler


def _stream(points):
    """(time_s, power_w) pairs -> sample dicts as the engine passes them."""
    return [{"time_s": t, "power_w": p, "sm_clock_mhz": 1800, "temperature_c": 50, "throttled": False}
            for t, p in points]


# 0.1 s apart: 3 samples before the loop (50 W), 11 while it runs (10.0 s .. 11.0 s), 2 after (60 W)
PRE = [(9.7, 50.0), (9.8, 50.0), (9.9, 50.0)]
LOOP_W = [100.0, 180.0] + [200.0] * 9
DURING = [(round(10.0 + 0.1 * i, 1), p) for i, p in enumerate(LOOP_W)]
POST = [(11.1, 60.0), (11.2, 60.0)]
LOOP = {"forwards": 100, "loop_s": 1.0, "t_start": 10.0, "t_end": 11.0}


def test_trim_and_its_refusal():
    assert es.trim([1, 2, 3, 4, 5], 1, 2) == [2, 3]
    assert es.trim([1, 2, 3], 0, 0) == [1, 2, 3]
    with pytest.raises(MeasurementError, match="leaves none"):
        es.trim([1, 2, 3], 2, 1)


def test_ramp_length():
    assert es.ramp_length([10, 50, 95, 100, 100, 100], 0.9) == 2  # median 100, threshold 90
    assert es.ramp_length([100, 100, 100], 0.9) == 0
    assert es.ramp_length([], 0.9) == 0
    with pytest.raises(ValueError):
        es.ramp_length([1.0], 0.0)


def test_energy_per_forward_by_hand():
    assert es.energy_per_forward_mj(500.0, 2.0, 1000) == pytest.approx(1000.0)  # 500 W * 2 s / 1000 = 1 J
    with pytest.raises(MeasurementError):
        es.energy_per_forward_mj(500.0, 2.0, 0)


def test_counter_method_and_a_counter_that_went_backwards():
    assert es.counter_energy_per_forward_mj(1000.0, 1500.0, 1000) == pytest.approx(500.0)
    with pytest.raises(MeasurementError, match="backwards"):
        es.counter_energy_per_forward_mj(1500.0, 1000.0, 10)


def test_paper_trim_keeps_exactly_the_loop_samples():
    rec = es.summarize_loop(_stream(PRE + DURING + POST), {**LOOP, "energy_start_j": 5000.0, "energy_end_j": 5195.0},
                            trim_start=3, trim_end=2, ramp_fraction=0.9)
    mean = (100 + 180 + 9 * 200) / 11  # 189.0909 W
    assert rec["kept_samples"] == 11 and rec["kept_outside_loop"] == 0
    assert rec["mean_power_w"] == pytest.approx(mean)
    e = rec["energy_per_forward_mj"]
    assert e["sampled"] == pytest.approx(mean * 1.0 / 100 * 1e3)  # 1890.91 mJ
    assert e["sampled_in_loop"] == pytest.approx(e["sampled"])
    # median 200 W -> threshold 180 W: only the 100 W sample is ramp; without it the mean is 198 W
    assert rec["ramp"]["samples"] == 1 and rec["ramp"]["threshold_w"] == pytest.approx(180.0)
    assert rec["ramp"]["duration_s"] == pytest.approx(0.1)
    assert e["sampled_no_ramp"] == pytest.approx(1980.0)
    assert e["counter"] == pytest.approx(1950.0)  # 195 J over 100 forwards
    assert rec["counter_mean_power_w"] == pytest.approx(195.0)
    assert rec["time_per_forward_ms"] == pytest.approx(10.0)
    assert rec["median_sm_clock_mhz"] == 1800


def test_a_short_trim_keeps_a_pre_loop_sample_and_says_so():
    rec = es.summarize_loop(_stream(PRE + DURING + POST), LOOP, trim_start=2, trim_end=2)
    assert rec["kept_samples"] == 12 and rec["kept_outside_loop"] == 1
    e = rec["energy_per_forward_mj"]
    assert e["sampled"] == pytest.approx((50 + 2080) / 12 * 10)  # 1775 mJ
    assert e["sampled_in_loop"] == pytest.approx(2080 / 11 * 10)  # chosen by time stamps instead
    # median of the 12 kept values is 200 W: the 50 W and 100 W samples are ramp
    assert rec["ramp"]["samples"] == 2 and e["sampled_no_ramp"] == pytest.approx(1980.0)
    assert e["counter"] is None


def test_samples_without_power_are_counted_and_left_out():
    samples = _stream(PRE + DURING + POST)
    samples.insert(5, {"time_s": 10.15, "power_w": None})
    rec = es.summarize_loop(samples, LOOP, trim_start=3, trim_end=2)
    assert rec["samples_without_power"] == 1 and rec["kept_samples"] == 11
    assert rec["energy_per_forward_mj"]["sampled"] == pytest.approx(2080 / 11 * 10)


def test_idle_level_is_reported_not_subtracted():
    rec = es.summarize_loop(_stream(PRE + DURING + POST), {**LOOP, "idle_power_w": 89.0909090909}, 3, 2)
    assert rec["energy_per_forward_mj"]["sampled"] == pytest.approx(2080 / 11 * 10)
    assert rec["energy_above_idle_per_forward_mj"] == pytest.approx((2080 / 11 - 89.0909090909) * 10)


def _loop_rec(i, variant, sampled, counter, ms, watts):
    return {"loop": i, "variant": variant, "forwards": 100, "time_per_forward_ms": ms, "mean_power_w": watts,
            "median_sm_clock_mhz": 1800.0, "idle_power_w": 80.0,
            "energy_per_forward_mj": {"sampled": sampled, "sampled_in_loop": sampled, "sampled_no_ramp": sampled,
                                      "counter": counter}}


def test_power_is_set_against_the_baseline_and_idle_power_averaged():
    loops = [_loop_rec(0, "A0", 1000.0, 1010.0, 1.0, 1000.0), _loop_rec(1, "A1", 900.0, 909.0, 0.9, 900.0)]
    s = es.summarize_energy(loops, "A0")
    assert s["vs_baseline"]["A1"]["ratio"]["mean_power"] == pytest.approx(0.9)
    assert s["vs_baseline"]["A1"]["change_pct"]["mean_power"] == pytest.approx(-10.0)
    idle = [{**_loop_rec(i, "A0", 1000.0, 1000.0, 1.0, 900.0), "idle_power_w": w} for i, w in enumerate((80, 80, 110))]
    assert es.summarize_energy(idle, "A0")["variants"]["A0"]["idle_power_w"] == pytest.approx(90.0)


def test_an_energy_counter_that_did_not_move_reads_zero():
    assert es.counter_energy_per_forward_mj(100.0, 100.0, 10) == 0.0
    with pytest.raises(MeasurementError, match="went backwards"):
        es.counter_energy_per_forward_mj(100.0, 99.0, 10)


def test_ratios_and_drift_over_an_alternating_order():
    loops = [_loop_rec(0, "A0", 1000.0, 1010.0, 1.0, 1000.0), _loop_rec(1, "A1", 900.0, 909.0, 0.9, 1000.0),
             _loop_rec(2, "A1", 950.0, 959.5, 0.95, 1000.0), _loop_rec(3, "A0", 1100.0, 1111.0, 1.1, 1000.0)]
    s = es.summarize_energy(loops, "A0")
    a0, a1 = s["variants"]["A0"], s["variants"]["A1"]
    assert a0["energy_per_forward_mj"]["sampled"] == pytest.approx(1050.0)
    assert a1["energy_per_forward_mj"]["counter"] == pytest.approx(934.25)
    assert a0["loop_indices"] == [0, 3] and a0["forwards"] == 200
    r = s["vs_baseline"]["A1"]
    assert r["ratio"]["sampled"] == pytest.approx(925.0 / 1050.0)
    assert r["ratio"]["counter"] == pytest.approx(934.25 / 1060.5)
    assert r["change_pct"]["time_per_forward"] == pytest.approx(100 * (0.925 / 1.05 - 1))
    assert r["change_pct"]["mean_power"] == pytest.approx(0.0)
    assert a0["drift_first_to_last_pct"]["sampled"] == pytest.approx(10.0)
    assert a1["drift_first_to_last_pct"]["counter"] == pytest.approx(100 * (959.5 / 909.0 - 1))
    assert "A0" not in s["vs_baseline"]


def test_a_method_missing_in_one_loop_has_no_mean():
    loops = [_loop_rec(0, "A0", 1000.0, None, 1.0, 900.0), _loop_rec(1, "A0", 1000.0, 1000.0, 1.0, 900.0)]
    s = es.summarize_energy(loops, "A0")
    assert s["variants"]["A0"]["energy_per_forward_mj"]["counter"] is None


# --- the power sampler ------------------------------------------------------------------------------------
def _replay(values):
    it = iter(values)
    return lambda: GpuReading(time.monotonic(), 1800, 2600, 45, next(it), 0)


def test_sampler_replays_a_source_between_start_and_stop():
    s = PowerSampler(_replay(itertools.count(100.0)), interval_s=0.005)
    s.start()
    time.sleep(0.1)
    got = s.stop()
    assert len(got) >= 3
    assert [r.power_w for r in got] == [100.0 + i for i in range(len(got))]
    assert all(a.time_s <= b.time_s for a, b in zip(got, got[1:]))


def test_sampler_misuse_and_a_failing_source():
    with pytest.raises(ValueError):
        PowerSampler(lambda: None, interval_s=0)
    s = PowerSampler(_replay([1.0] * 1000), 0.01)
    with pytest.raises(RuntimeError):
        s.stop()
    s.start()
    with pytest.raises(RuntimeError):
        s.start()
    s.stop()

    def broken():
        raise OSError("sensor gone")

    s = PowerSampler(broken, 0.01)
    s.start()
    time.sleep(0.05)
    with pytest.raises(MeasurementError, match="sensor gone"):
        s.stop()


# --- refusals -------------------------------------------------------------------------------------------------
def test_no_nvml_is_a_clear_error(monkeypatch):
    import softbench.core.nvml as nv
    from softbench.energy.engine import open_power_source

    def no_nvml():
        raise UnsupportedError("NVML is not available: the nvidia-ml-py package is not installed")

    monkeypatch.setattr(nv, "_import_pynvml", no_nvml)
    with pytest.raises(UnsupportedError, match="needs NVML") as e:
        open_power_source()
    assert "NVIDIA driver" in e.value.hint


def test_energy_command_without_nvml_refuses_with_exit_code_3(monkeypatch, capsys):
    import softbench.core.nvml as nv
    from softbench.cli import main

    def no_nvml():
        raise UnsupportedError("NVML is not available")

    monkeypatch.setattr(nv, "_import_pynvml", no_nvml)
    assert main(["energy", "--backend", "sim", "--seq", "256"]) == 3
    assert "needs NVML" in capsys.readouterr().err


class FakePower:
    """A replayed board: power cycles through 100..104 W; it claims a counter, which a CPU worker cannot read."""

    def __init__(self):
        self.n = itertools.count()

    def read(self):
        return GpuReading(time.monotonic(), 1500, 2600, 40, 100.0 + next(self.n) % 5, 0)

    def has_energy_counter(self):
        return True

    def describe(self):
        return {"name": "replay"}


def _stand_in_board(monkeypatch, device):
    """The energy command's machine checks answered by a replayed NVML board and `device` (softbench's Device)."""
    import softbench.kernels.capability as cap
    import softbench.energy.engine as en

    monkeypatch.setattr(en, "open_power_source", lambda index=0: FakePower())
    monkeypatch.setattr(cap, "detect_device", lambda prefer_cuda=True: device)


def test_energy_command_refuses_a_cpu_backend_even_with_nvml(monkeypatch, capsys):
    import softbench.kernels.capability as cap
    from softbench.cli import main

    _stand_in_board(monkeypatch, cap.Device("cpu", "cpu", None))
    assert main(["energy", "--backend", "sim", "--seq", "256"]) == 3
    assert "runs on the CPU" in capsys.readouterr().err


def test_default_dtype_follows_the_gpu():
    from softbench.kernels.capability import Device
    from softbench.energy.engine import default_dtype

    assert default_dtype("fa4", Device("cuda", "B200", 100))[0] == "fp8"
    dt, note = default_dtype("fa4", Device("cuda", "H200", 90))
    assert dt == "bf16" and "sm_90" in note
    assert default_dtype("sim", Device("cuda", "B200", 100))[0] == "bf16"


def test_default_dtype_at_the_edges_of_fp8_support():
    """FA4's FP8 forward is the sm_100 family's (sm_100 to sm_11x), softbench's Triton forward's from sm_89 on."""
    from softbench.kernels.capability import Device
    from softbench.energy.engine import default_dtype

    assert default_dtype("fa4", Device("cuda", "Thor", 110))[0] == "fp8"
    assert default_dtype("fa4", Device("cuda", "RTX 5090", 120))[0] == "bf16"
    assert default_dtype("triton", Device("cuda", "L40S", 89))[0] == "fp8"
    assert default_dtype("triton", Device("cuda", "A100", 80))[0] == "bf16"


def test_a_sample_at_either_end_of_the_timed_loop_is_a_loop_sample():
    """The samples' phase as samples.jsonl records it agrees with the summary's [t_start, t_end], both ends in."""
    from softbench.energy.engine import _phase

    loop = {"t_start": 10.0, "t_end": 11.0}
    assert [_phase(t, loop) for t in (9.9, 10.0, 10.5, 11.0, 11.1)] == ["pre", "loop", "loop", "loop", "post"]


def test_options_refuse_a_trim_that_leaves_nothing(tmp_path):
    from softbench.core.protocol import EnergyProtocol
    from softbench.energy.engine import EnergyOptions
    from softbench.core.shapes import Shape

    with pytest.raises(UsageError, match="leaves nothing"):
        EnergyOptions(shape=Shape(), protocol=EnergyProtocol(seconds=1.0, interval_s=0.1, pre_s=2.0, post_s=1.0,
                                                             trim_start=20, trim_end=20))
    with pytest.raises(UsageError, match="names no loops"):
        EnergyProtocol(order=())


def test_the_trim_counts_the_samples_before_and_after_the_loop():
    """The sampler runs pre_s + seconds + post_s: 40 samples at 0.1 s here, of which 29 are trimmed (the timed
    loop alone gives only 10)."""
    from softbench.core.protocol import EnergyProtocol

    EnergyProtocol(seconds=1.0, interval_s=0.1, pre_s=2.0, post_s=1.0, trim_start=20, trim_end=9).check_trim()


def test_a_file_order_is_read_as_names_and_each_kernel_gets_one_worker():
    """`order` comma-separated drops the empty item a trailing comma leaves; `variants`, one worker per kernel,
    names each kernel once in the order of its first loop."""
    from softbench.core.protocol import energy_protocol_from_mapping

    p = energy_protocol_from_mapping({"order": "A1, A0, A0, A1,"}, "e.yaml")
    assert p.order == ("A1", "A0", "A0", "A1") and p.variants == ["A1", "A0"]


def test_an_energy_file_cannot_set_the_settle_window():
    """The settle window is no command-line option, so no file setting either: its defaults serve every run."""
    from softbench.core.protocol import energy_protocol_from_mapping

    with pytest.raises(UsageError, match="e.yaml: unknown key 'settle_min_s'"):
        energy_protocol_from_mapping({"settle_min_s": 1.0}, "e.yaml")


# --- the engine end to end on the CPU ---------------------------------------------------------------------------
@pytest.mark.slow
def test_engine_end_to_end_with_a_replayed_power_source(tmp_path):
    from softbench.core.protocol import EnergyProtocol
    from softbench.energy.engine import EnergyOptions, run_energy
    from softbench.core.session import read_jsonl
    from softbench.core.shapes import Shape

    loops = EnergyProtocol(order=("A0", "A1", "A1", "A0"), seconds=0.3, interval_s=0.02, pre_s=0.1, post_s=0.05,
                           idle_s=0.06, trim_start=5, trim_end=2, warmup=1, chunk=2, settle_min_s=0.05, settle_max_s=1.0)
    opts = EnergyOptions(shape=Shape(seq=64, heads=2), protocol=loops, backend="sim", out_dir=tmp_path,
                         require_gpu=False)
    session = run_energy(opts, FakePower())
    from test_vocabulary import assert_covered

    assert_covered(session.path)  # what it records, a seal can scope (the settle window went unlisted for six days)
    names = {p.name for p in session.path.iterdir()}
    assert {"env.json", "protocol.yaml", "samples.jsonl", "loops.jsonl", "summary.json", "summary.md",
            "power.png", "smoke.json", "status.json"} <= names
    loops = read_jsonl(session.path / "loops.jsonl")
    assert [lp["variant"] for lp in loops] == ["A0", "A1", "A1", "A0"]
    # a CPU worker has no NVML readings: each loop's settling is its minimum, and says so
    assert all(lp["settle"]["reason"] == "no readings: fixed warm-up" and lp["settle"]["elapsed_s"] >= 0.05
               for lp in loops)
    samples = read_jsonl(session.path / "samples.jsonl")
    assert {s["phase"] for s in samples} == {"idle", "pre", "loop", "post"}
    for s in samples:
        assert {"loop", "variant", "time_s", "power_w", "sm_clock_mhz", "temperature_c", "throttle_reasons"} <= set(s)
    in_loop = [s for s in samples if s["phase"] == "loop"]
    assert all(0 <= s["time_s"] <= loops[s["loop"]]["loop_s"] for s in in_loop)
    for lp in loops:  # the loop's record agrees with the samples it wrote: its idle level, its in-loop samples
        idle = [s["power_w"] for s in samples if s["loop"] == lp["loop"] and s["phase"] == "idle"]
        assert lp["idle_samples"] == len(idle) > 0 and lp["idle_power_w"] == pytest.approx(sum(idle) / len(idle))
        assert lp["in_loop_samples"] == sum(s["loop"] == lp["loop"] for s in in_loop) > 0
        # the paper's method: the mean of the loop's stream without its first trim_start and last trim_end samples
        stream = sorted((s for s in samples if s["loop"] == lp["loop"] and s["phase"] != "idle"),
                        key=lambda s: s["time_s"])
        assert lp["mean_power_w"] == pytest.approx(sum(s["power_w"] for s in stream[5:-2]) / (len(stream) - 7))
    summary = json.loads((session.path / "summary.json").read_text())
    assert summary["command"] == "energy" and summary["complete"] and summary["baseline"] == "A0"
    for lp in summary["loops"]:
        e = lp["energy_per_forward_mj"]
        # the recorded arithmetic: mean kept power * host loop time / forwards
        assert e["sampled"] == pytest.approx(lp["mean_power_w"] * lp["loop_s"] / lp["forwards"] * 1e3)
        assert e["counter"] is None  # a CPU worker has no board counter to read
        assert 100.0 <= lp["mean_power_w"] <= 104.0
    assert set(summary["vs_baseline"]) == {"A1"}
    assert "sampled" in summary["vs_baseline"]["A1"]["ratio"]
    assert json.loads((session.path / "status.json").read_text())["complete"] is True


def _recording_worker(sent):
    """A worker factory: the real worker state in this process, with every request it is sent written down."""
    from inprocess_worker import InProcessRunner

    class RecordingWorker(InProcessRunner):
        pid = 0

        def _send_load(self):
            pass

        def _reply(self):
            return {"result": self.load()}

        def request(self, op, **fields):
            sent.append((self.label, op, fields))
            return super().request(op, **fields)

        def copy_log(self, dest):
            pass

        def close(self):
            sent.append((self.label, "close", {}))

    return RecordingWorker


def test_the_engine_sends_the_protocols_seed_warmup_and_chunk_to_its_workers(tmp_path):
    """The seed picks the inputs every kernel is measured on, and the warm-up and chunk are how the loop runs:
    what the protocol (and so the session's protocol.yaml) says must be what each worker is asked to do."""
    from softbench.core.protocol import EnergyProtocol
    from softbench.core.session import read_jsonl
    from softbench.core.shapes import Shape
    from softbench.energy.engine import EnergyOptions, run_energy

    sent = []
    RecordingWorker = _recording_worker(sent)

    loops = EnergyProtocol(order=("A0", "A1"), seconds=0.05, interval_s=0.02, pre_s=0, post_s=0, idle_s=0,
                           trim_start=0, trim_end=0, warmup=3, chunk=2, seed=7, settle_min_s=0.01, settle_max_s=0.5)
    opts = EnergyOptions(shape=Shape(seq=64, heads=2), protocol=loops, backend="sim", out_dir=tmp_path,
                         require_gpu=False)
    session = run_energy(opts, FakePower(), worker_factory=RecordingWorker)
    prepares = [(label, f["seed"]) for label, op, f in sent if op == "prepare"]
    assert sorted(prepares) == [("A0", 7), ("A1", 7)]
    runs = [(label, f["warmup"], f["chunk"], f["seconds"]) for label, op, f in sent if op == "energy_loop"]
    assert runs == [("A0", 3, 2, 0.05), ("A1", 3, 2, 0.05)]
    for lp in read_jsonl(session.path / "loops.jsonl"):  # whole chunks of 2 calls, as asked
        assert lp["chunk"] == 2 and lp["forwards"] % 2 == 0 and lp["forwards"] > 0
    assert sorted(label for label, op, f in sent if op == "close") == ["A0", "A1"]  # no worker left running
    # the first kernel in the order is the baseline, not the last one
    assert json.loads((session.path / "summary.json").read_text())["baseline"] == "A0"


def test_the_engine_refuses_a_worker_on_the_cpu_before_it_opens_a_session(tmp_path):
    """A CPU kernel would leave the board idle: its 'energy per forward' would measure nothing, so the engine
    itself refuses it (not only the command line), and no session is left behind."""
    from softbench.core.protocol import EnergyProtocol
    from softbench.core.shapes import Shape
    from softbench.energy.engine import EnergyOptions, run_energy

    loops = EnergyProtocol(order=("A0",), seconds=0.05, interval_s=0.02, pre_s=0, post_s=0, idle_s=0,
                           trim_start=0, trim_end=0, warmup=1, chunk=1, settle_min_s=0.01, settle_max_s=0.5)
    opts = EnergyOptions(shape=Shape(seq=64, heads=2), protocol=loops, backend="sim", out_dir=tmp_path)
    with pytest.raises(UnsupportedError, match="runs on the CPU"):
        run_energy(opts, FakePower(), worker_factory=_recording_worker([]))
    assert list(tmp_path.iterdir()) == []


def test_idle_power_averages_only_the_idle_samples_that_have_a_power(tmp_path):
    """NVML may answer a reading without its power; the idle level is the mean of the powers it did give
    (here every other reading has none), while idle_samples still counts every idle reading."""
    from softbench.core.protocol import EnergyProtocol
    from softbench.core.session import read_jsonl
    from softbench.core.shapes import Shape
    from softbench.energy.engine import EnergyOptions, run_energy

    class EveryOtherPowerMissing(FakePower):
        def read(self):
            n = next(self.n)
            return GpuReading(time.monotonic(), 1500, 2600, 40, None if n % 2 else 100.0 + n % 6, 0)

    loops = EnergyProtocol(order=("A0",), seconds=0.05, interval_s=0.02, pre_s=0, post_s=0, idle_s=0.15,
                           trim_start=0, trim_end=0, warmup=1, chunk=1, settle_min_s=0.01, settle_max_s=0.5)
    opts = EnergyOptions(shape=Shape(seq=64, heads=2), protocol=loops, backend="sim", out_dir=tmp_path,
                         require_gpu=False)
    session = run_energy(opts, EveryOtherPowerMissing(), worker_factory=_recording_worker([]))
    (lp,) = read_jsonl(session.path / "loops.jsonl")
    idle = [s for s in read_jsonl(session.path / "samples.jsonl") if s["phase"] == "idle"]
    powers = [s["power_w"] for s in idle if s["power_w"] is not None]
    assert lp["idle_samples"] == len(idle) and len(powers) < len(idle)
    assert lp["idle_power_w"] == pytest.approx(sum(powers) / len(powers))


def _capture_energy_options(monkeypatch, args, arch=100):
    """Run the energy command up to the engine with a stand-in board; return the options it would run."""
    from click.testing import CliRunner

    import softbench.kernels.capability as cap
    import softbench.energy.engine as en
    from softbench.energy import command as energy

    seen = {}

    def fake_run(opts, power, progress=None):
        seen["opts"] = opts
        raise KeyboardInterrupt  # stop before anything is measured

    monkeypatch.setattr(en, "run_energy", fake_run)
    _stand_in_board(monkeypatch, cap.Device("cuda", "gpu", arch))
    result = CliRunner().invoke(energy.command, args)
    return seen.get("opts"), result


def test_protocol_file_sets_options_and_the_command_line_wins(monkeypatch, tmp_path):
    from pathlib import Path

    paper = Path(__file__).resolve().parents[1] / "softbench" / "protocols" / "energy.yaml"
    opts, _ = _capture_energy_options(monkeypatch, ["--protocol", str(paper), "--seconds", "20", "--trim-end", "3"])
    p = opts.protocol
    assert p.seconds == 20.0 and p.trim_end == 3  # given on the command line
    assert (p.trim_start, p.interval_s, p.pre_s, p.post_s, p.warmup, p.chunk) == (20, 0.1, 2.0, 1.0, 30, 50)
    assert p.order == ("A0", "A1", "A1", "A0") and opts.shape.seq == 16384 and opts.shape.causal
    assert opts.shape.dtype == "fp8"  # the file leaves the dtype to the GPU: FP8 on sm_100
    f = tmp_path / "e.yaml"
    f.write_text("order: [A1, A0]\ndtype: bf16\nseq: 8K\ninterval_ms: 50\n")
    opts, _ = _capture_energy_options(monkeypatch, ["--protocol", str(f)])
    assert opts.protocol.order == ("A1", "A0") and opts.shape.dtype == "bf16" and opts.shape.seq == 8192
    # the interval in milliseconds in the file and on the command line, in seconds in the protocol the run keeps
    assert opts.protocol.interval_s == 0.05
    opts, _ = _capture_energy_options(monkeypatch, ["--protocol", str(f), "--interval-ms", "20"])
    assert opts.protocol.interval_s == 0.02 and opts.to_dict()["interval_s"] == 0.02
    f.write_text("sekonds: 10\n")
    opts, result = _capture_energy_options(monkeypatch, ["--protocol", str(f)])
    assert opts is None and "unknown key 'sekonds'" in str(result.exception)


def test_the_command_lines_defaults_are_the_protocols_and_the_packaged_files(monkeypatch):
    """The loop options default to EnergyProtocol's own values (the interval given in ms on the command line), so
    that a bare `softbench energy` runs what `--protocol energy` (the paper's B.3 file) runs: the same loops and the
    same shape."""
    from softbench.core.protocol import EnergyProtocol

    from softbench.energy.engine import EnergyOptions

    bare, _ = _capture_energy_options(monkeypatch, [])
    paper, _ = _capture_energy_options(monkeypatch, ["--protocol", "energy"])
    assert bare.protocol == EnergyProtocol() == paper.protocol
    assert bare.shape == paper.shape
    assert bare.out_dir == EnergyOptions(shape=bare.shape).out_dir  # the folder every command writes to


@pytest.mark.parametrize("args", [["--interval-ms", "0.5"], ["--ramp-fraction", "0.0"], ["--ramp-fraction", "1.5"],
                                  ["--chunk", "0"], ["--trim-start", "-1"], ["--trim-end", "-1"], ["--seconds", "0.0"],
                                  ["--idle-s", "-1.0"], ["--seed", "-1"], ["--warmup", "100001"]])
def test_a_loop_option_past_its_range_is_refused_as_the_option(args):
    # while the command line is read, in the option's words and unit, with the range --help shows
    import click

    from softbench.energy import command as energy

    with pytest.raises(click.BadParameter) as e:
        energy.command.make_context("energy", list(args))
    assert f"'{args[0]}': {args[1]} is not in the range" in e.value.format_message()


def test_the_loop_options_take_the_ends_of_their_ranges():
    """No trim, no idle sampling, no margin around the loop and no warm-up are runs one may ask for; a ramp share of
    1 and the 1 ms interval are the closed ends."""
    from softbench.energy import command as energy

    args = ["--trim-start", "0", "--trim-end", "0", "--idle-s", "0", "--pre-s", "0", "--post-s", "0", "--warmup", "0",
            "--ramp-fraction", "1", "--interval-ms", "1", "--chunk", "1"]
    p = energy.command.make_context("energy", args).params
    assert (p["trim_start"], p["trim_end"], p["idle_s"], p["pre_s"], p["post_s"], p["warmup"]) == (0, 0, 0, 0, 0, 0)
    assert (p["ramp_fraction"], p["interval_s"], p["chunk"]) == (1.0, 1e-3, 1)


def test_the_order_and_the_triton_configuration_are_read_as_energys_own_options(monkeypatch):
    """A bad --order is refused naming --order (not sweep's --variants), a configuration for another backend than
    triton is refused, and triton's configuration reaches the run as the backend's options."""
    from softbench.core.options import parse_triton_config

    opts, result = _capture_energy_options(monkeypatch, ["--order", "A0,,A1"])
    assert opts is None and str(result.exception).startswith("--order 'A0,,A1' has an empty item")
    opts, result = _capture_energy_options(monkeypatch, ["--backend", "fa4", "--triton-config", "m64n32w4s2"])
    assert opts is None and result.exit_code == 2
    assert "--triton-config applies to --backend triton only" in result.output
    opts, _ = _capture_energy_options(monkeypatch, ["--backend", "triton", "--dtype", "bf16", "--triton-config",
                                                    "m64n32w4s2"])
    assert opts.backend_options == parse_triton_config("m64n32w4s2")


def test_the_run_records_where_its_dtype_came_from(monkeypatch, tmp_path):
    # the same bf16 from a protocol file and from --dtype: the session says which, beside the GPU's default
    f = tmp_path / "e.yaml"
    f.write_text("dtype: bf16\n")
    from_file, _ = _capture_energy_options(monkeypatch, ["--protocol", str(f)])
    given, _ = _capture_energy_options(monkeypatch, ["--dtype", "bf16"])
    assert from_file.shape.dtype == given.shape.dtype == "bf16"
    assert "protocol file" in from_file.dtype_note and "command line" in given.dtype_note


def test_a_shape_past_the_machines_memory_is_refused_before_measuring(monkeypatch):
    # inputs of petabytes: no machine holds them, so the refusal comes before any worker allocates them
    opts, result = _capture_energy_options(monkeypatch, ["--seq", "1048576", "--batch", "1000"])
    assert opts is None and isinstance(result.exception, UsageError) and "of memory" in str(result.exception)


def test_the_run_records_the_command_line_as_typed(monkeypatch):
    monkeypatch.setattr("sys.argv", ["/usr/bin/softbench", "energy", "--seconds", "20", "--order", "A0, A1"])
    opts, _ = _capture_energy_options(monkeypatch, ["--seconds", "20", "--order", "A0, A1"])
    assert opts.command_line == "softbench energy --seconds 20 --order 'A0, A1'"


def test_fp8_on_sm90_is_refused_before_measuring(monkeypatch):
    opts, result = _capture_energy_options(monkeypatch, ["--dtype", "fp8"], arch=90)
    assert opts is None and isinstance(result.exception, UnsupportedError) and "sm_90" in str(result.exception)


def test_a_failing_power_source_leaves_a_partial_session_with_the_loops_it_measured(tmp_path):
    from softbench.core.protocol import EnergyProtocol
    from softbench.energy.engine import EnergyOptions, run_energy
    from softbench.core.session import read_jsonl
    from softbench.core.shapes import Shape

    class DiesInTheSecondLoop(FakePower):
        def __init__(self):
            super().__init__()
            self.loops_started = 0

        def read(self):
            if self.loops_started >= 2:
                raise OSError("NVML stopped answering")
            return super().read()

    power = DiesInTheSecondLoop()
    loops = EnergyProtocol(order=("A0", "A0"), seconds=0.2, interval_s=0.02, pre_s=0.05, post_s=0.02, idle_s=0,
                           trim_start=2, trim_end=1, warmup=1, chunk=1, settle_min_s=0.05, settle_max_s=1.0)
    opts = EnergyOptions(shape=Shape(seq=64, heads=2), protocol=loops, backend="sim", out_dir=tmp_path,
                         require_gpu=False)

    class CountingProgress:
        def start(self, n): ...
        def message(self, text):
            if text.startswith("loop "):
                power.loops_started += 1
        def window(self, label, rec): ...

    with pytest.raises(MeasurementError, match="NVML stopped answering"):
        run_energy(opts, power, CountingProgress())
    (session,) = list(tmp_path.iterdir())
    assert len(read_jsonl(session / "loops.jsonl")) == 1
    assert {"worker-A0.log"} <= {p.name for p in session.iterdir()}  # the worker's log kept beside what it measured
    # idle_s=0: no idle sampling at all
    assert read_jsonl(session / "loops.jsonl")[0]["idle_samples"] == 0
    assert all(s["phase"] != "idle" for s in read_jsonl(session / "samples.jsonl"))
    summary = json.loads((session / "summary.json").read_text())
    assert summary["complete"] is False and "NVML stopped answering" in summary["incomplete_reason"]
    assert json.loads((session / "status.json").read_text())["state"] == "partial"
    assert "PARTIAL SESSION" in (session / "summary.md").read_text()


# --- cases a hand mutation of core/protocol.py survived ------------------------------------------------------------

@pytest.mark.parametrize("values, says", [
    # an order given in code as one string would be read letter by letter as kernels named "A", "0", ","
    ({"order": "A0,A1"}, "order must be kernel names, comma-separated or as a list, got 'A0,A1'"),
    ({"order": ("A0", 1)}, "order must be kernel names"),
    ({"trim_start": -1}, "trim_start must be a non-negative integer, got -1"),
    ({"trim_end": -1}, "trim_end must be a non-negative integer, got -1"),
    ({"warmup": -1}, "warmup must be a non-negative integer, got -1"),
    ({"seconds": 0}, "seconds must be a finite positive number, got 0"),
    ({"idle_s": -1.0}, "idle_s must be a finite non-negative number, got -1.0"),
    ({"pre_s": -1.0}, "pre_s must be a finite non-negative number, got -1.0"),
    ({"post_s": -1.0}, "post_s must be a finite non-negative number, got -1.0"),
    ({"seed": -1}, "seed must be a non-negative integer, got -1"),
    ({"interval_s": float("inf")}, "the sampling interval must be a finite number of at least 1 ms, got inf"),
    ({"interval_s": 0.002}, None),  # 2 ms: above the bound
    ({"ramp_fraction": 0.0}, "ramp_fraction must be in (0, 1], got 0.0"),
    ({"ramp_fraction": "0.9"}, "ramp_fraction must be in (0, 1], got '0.9'"),
    ({"ramp_fraction": 0.5}, None),
    ({"heads": 0}, "heads must be a positive integer, got 0"),
    ({"dtype": "fp4"}, "dtype must be one of"),
    ({"causal": "yes"}, "causal must be true or false, got 'yes'"),
    ({"seq": ("8Q",)}, "8Q"),
])
def test_an_energy_protocol_refuses_each_setting_out_of_its_range_and_takes_one_inside(values, says):
    from softbench.core.protocol import EnergyProtocol

    if says is None:
        assert EnergyProtocol(**values).settings().items() >= values.items()
        return
    with pytest.raises(UsageError, match=re.escape(says)):
        EnergyProtocol(**values)


def test_the_trim_may_keep_a_single_sample_of_the_pre_loop_loop_and_post_loop_samples():
    """pre_s + seconds + post_s = 4 s at 0.1 s is 40 samples: a trim of 39 leaves one, of 40 none."""
    from softbench.core.protocol import EnergyProtocol

    loops = dict(seconds=1.0, interval_s=0.1, pre_s=2.0, post_s=1.0, trim_start=20)
    EnergyProtocol(**loops, trim_end=19).check_trim()
    with pytest.raises(UsageError, match="leaves nothing of the about 40 samples"):
        EnergyProtocol(**loops, trim_end=20).check_trim()


def test_the_loops_settings_leave_the_shape_out_and_the_settings_leave_out_what_the_protocol_does_not_set():
    from softbench.core.protocol import EnergyProtocol
    from softbench.core.shapes import SHAPE_KEYS

    p = EnergyProtocol(dtype="bf16", heads=8)
    assert not set(p.loop_settings()) & set(SHAPE_KEYS) and p.loop_settings()["seconds"] == p.seconds
    assert p.settings()["dtype"] == "bf16" and "head_dim" not in p.settings()


def test_an_energy_file_gives_the_interval_in_milliseconds_and_seq_as_one_length_or_a_list():
    from softbench.core.protocol import energy_protocol_from_mapping

    p = energy_protocol_from_mapping({"interval_ms": 50, "seq": 8192, "order": ["A0", 1]}, "e.yaml")
    assert (p.interval_s, p.seq, p.order) == (0.05, ("8192",), ("A0", "1"))
    assert energy_protocol_from_mapping({"seq": ["4K", 8192]}, "e.yaml").seq == ("4K", "8192")
    with pytest.raises(UsageError, match="e.yaml: unknown key 'interval_s'"):  # seconds are no file setting
        energy_protocol_from_mapping({"interval_s": 0.05}, "e.yaml")
    with pytest.raises(UsageError, match=r"^e.yaml: interval_ms must be a finite number of at least 1, got inf$"):
        energy_protocol_from_mapping({"interval_ms": float("inf")}, "e.yaml")
    # a refusal of the protocol names the file rather than "protocol"
    with pytest.raises(UsageError, match=r"^e.yaml: seconds must be a finite positive number, got 0$"):
        energy_protocol_from_mapping({"seconds": 0}, "e.yaml")


def test_a_loaded_energy_protocol_names_its_file_in_a_refusal(tmp_path):
    from softbench.core.protocol import load_energy_protocol

    f = tmp_path / "e.yaml"
    f.write_text("seconds: 0\n")
    with pytest.raises(UsageError, match=rf"^{re.escape(str(f))}: seconds must be"):
        load_energy_protocol(f)


def test_the_command_prints_the_recorded_runs_tables_ratios_and_drift(monkeypatch, tmp_path):
    """What `softbench energy` prints after its run, from the session the run wrote: here the H200's recorded FP8
    causal 8K session (A0, h15-folded, h15-folded, A0) stands in for the run, copied so that nothing of it changes."""
    import shutil
    from pathlib import Path

    from click.testing import CliRunner

    import softbench.kernels.capability as cap
    import softbench.energy.engine as en
    from softbench.core.session import Session
    from softbench.energy import command as energy

    recorded = (Path(__file__).resolve().parents[1] / "sessions"
                / "20261207T085756Z-energy-fp8-8K-causal-b1h16d128-triton-A0-h15-folded-h15-folded-A0")
    copy = tmp_path / recorded.name
    shutil.copytree(recorded, copy)
    summary = json.loads((copy / "summary.json").read_text())
    monkeypatch.setattr(en, "run_energy", lambda opts, power, progress=None: Session.open(copy))
    _stand_in_board(monkeypatch, cap.Device("cuda", "gpu", 90))
    result = CliRunner().invoke(energy.command, ["--backend", "triton", "--dtype", "fp8", "--seq", "8K",
                                                 "--order", "A0,h15-folded,h15-folded,A0", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())  # the tables' cells wrapped at the runner's width read as one line
    change = summary["vs_baseline"]["h15-folded"]["change_pct"]
    assert (f"h15-folded vs A0: energy per forward sampled {change['sampled']:+.2f}%, "
            f"sampled_in_loop {change['sampled_in_loop']:+.2f}%") in text
    assert (f"counter {change['counter']:+.2f}%; time per forward {change['time_per_forward']:+.2f}%; "
            f"mean power {change['mean_power']:+.2f}%") in text
    for name, variant in summary["variants"].items():
        drift = variant["drift_first_to_last_pct"]
        listed = ", ".join(f"{method} {pct:+.2f}%" for method, pct in drift.items())  # the file's order
        assert f"drift of {name} from its first to its last loop: {listed}" in text
    assert "per loop" in text and "per kernel (mean over its loops), mJ per forward" in text
    assert f"session: {copy}" in text
