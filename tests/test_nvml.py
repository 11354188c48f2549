"""NVML's board for this process: the one its CUDA device 0 runs on, found by UUID (NVML ignores
CUDA_VISIBLE_DEVICES, so a process pinned to GPU 1 would otherwise read board 0)."""

import sys
import types


class _FakeNvml(types.SimpleNamespace):
    """pynvml with two boards, 0 (GPU-a) and 1 (GPU-b)."""

    class NVMLError(Exception):
        pass

    def __init__(self):
        super().__init__(nvmlInit=lambda: None)

    def nvmlDeviceGetHandleByIndex(self, i):
        return ["GPU-a", "GPU-b"][i]

    def nvmlDeviceGetHandleByUUID(self, uuid):
        if uuid not in ("GPU-a", "GPU-b"):
            raise self.NVMLError("not found")
        return uuid

    def nvmlDeviceGetIndex(self, handle):
        return ["GPU-a", "GPU-b"].index(handle)


def test_nvml_reads_the_board_of_cuda_device_0_by_its_uuid(monkeypatch):
    from softbench.core import nvml

    monkeypatch.setitem(sys.modules, "pynvml", _FakeNvml())
    monkeypatch.setattr(nvml, "cuda_device_uuid", lambda: "GPU-b")  # this process was pinned to board 1
    nv = nvml.Nvml()
    assert (nv.handle, nv.index, nv.matched_by) == ("GPU-b", 1, "cuda device 0 uuid")
    assert nvml.Nvml(0).handle == "GPU-a"  # an explicit index is NVML's own
    assert (nvml.Nvml(1).handle, nvml.Nvml(1).matched_by) == ("GPU-b", "index")
    monkeypatch.setattr(nvml, "cuda_device_uuid", lambda: None)  # no CUDA in this process: NVML's board 0
    assert (nvml.Nvml().handle, nvml.Nvml().matched_by) == ("GPU-a", "index")
    monkeypatch.setattr(nvml, "cuda_device_uuid", lambda: "GPU-z")  # a UUID NVML does not know
    assert nvml.Nvml().handle == "GPU-a"


class _BoardNvml(_FakeNvml):
    """One board's readings as NVML gives them: milliwatts, millijoules, MHz, bytes for text; power cannot be read
    where `power_mw` is None (some boards), and the throttle reasons come by the name of the NVML in use."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 0, 1, 0

    def __init__(self, power_mw=287_500, energy_mj=1_234_500, reasons=0x4 | 0x1, new_name=True):
        super().__init__()
        self.power_mw, self.energy_mj = power_mw, energy_mj
        if new_name:
            self.nvmlDeviceGetCurrentClocksEventReasons = lambda handle: reasons
        self.nvmlDeviceGetCurrentClocksThrottleReasons = lambda handle: 0x100  # the older name: never preferred

    def nvmlDeviceGetPowerUsage(self, handle):
        if self.power_mw is None:
            raise self.NVMLError("Not Supported")
        return self.power_mw

    def nvmlDeviceGetClockInfo(self, handle, which):
        return {0: 1755, 1: 2619}[which]

    def nvmlDeviceGetMaxClockInfo(self, handle, which):
        return 1980

    def nvmlDeviceGetTemperature(self, handle, which):
        return 47

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        if self.energy_mj is None:
            raise self.NVMLError("Not Supported")
        return self.energy_mj

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return 700_000

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA H200"

    def nvmlSystemGetDriverVersion(self):
        raise self.NVMLError("Not Supported")

    def nvmlDeviceGetUUID(self, handle):
        return handle

    def nvmlDeviceGetPersistenceMode(self, handle):
        return 1


def _board(monkeypatch, **kw):
    from softbench.core import nvml

    monkeypatch.setitem(sys.modules, "pynvml", _BoardNvml(**kw))
    monkeypatch.setattr(nvml, "cuda_device_uuid", lambda: None)
    return nvml.Nvml()


def test_a_reading_is_in_watts_and_names_why_the_clock_is_held(monkeypatch):
    """287 500 mW is 287.5 W; the reasons 0x4 | 0x1 are the software power cap (throttling) and idle (not)."""
    r = _board(monkeypatch).read()
    assert (r.power_w, r.sm_clock_mhz, r.mem_clock_mhz, r.temperature_c) == (287.5, 1755, 2619, 47)
    d = r.to_dict()
    assert d["throttle_reasons"] == ["gpu_idle", "sw_power_cap"] and d["throttled"] is True
    # the older NVML name is read only where the newer one is missing
    assert _board(monkeypatch, new_name=False).read().throttle_bits == 0x100
    # an idle board's clock is down for want of work, not held back: named, but not throttled
    idle = _board(monkeypatch, reasons=0x1).read().to_dict()
    assert idle["throttle_reasons"] == ["gpu_idle"] and idle["throttled"] is False


def test_a_field_the_board_cannot_read_is_none_and_the_rest_of_the_reading_is_kept(monkeypatch):
    r = _board(monkeypatch, power_mw=None).read()
    assert r.power_w is None and r.sm_clock_mhz == 1755 and r.temperature_c == 47


def test_only_load_lowering_reasons_count_as_throttling():
    """Idle (0x1), application clocks (0x2), sync boost (0x10) and display clock (0x100) do not lower the clock
    under load; the power cap, the slowdowns and the power brake (0x4, 0x8, 0x20, 0x40, 0x80) do."""
    from softbench.core.nvml import is_throttled, throttle_names

    assert not any(is_throttled(b) for b in (None, 0, 0x1, 0x2, 0x10, 0x100, 0x1 | 0x2 | 0x10 | 0x100))
    assert all(is_throttled(b) for b in (0x4, 0x8, 0x20, 0x40, 0x80, 0x1 | 0x80))
    assert throttle_names(0x8 | 0x40) == ["hw_slowdown", "hw_thermal_slowdown"] and throttle_names(0) == []


def test_the_energy_counter_is_read_in_joules_and_its_failure_is_a_measurement_error(monkeypatch):
    """NVML counts millijoules: 1 234 500 mJ is 1234.5 J. A board without the counter says so instead of failing,
    and a read that fails mid-run is a MeasurementError naming the call."""
    import pytest

    from softbench.core.errors import MeasurementError

    nv = _board(monkeypatch)
    assert nv.has_energy_counter() and nv.total_energy_j() == 1234.5
    nv = _board(monkeypatch, energy_mj=None)
    assert nv.has_energy_counter() is False
    with pytest.raises(MeasurementError, match="NVML total_energy_j failed: Not Supported"):
        nv.total_energy_j()


def test_the_board_is_described_in_watts_and_text(monkeypatch):
    d = _board(monkeypatch).describe()
    assert d["name"] == "NVIDIA H200" and d["uuid"] == "GPU-a" and d["driver"] is None  # a field it cannot read
    assert d["power_limit_w"] == 700.0 and d["max_sm_clock_mhz"] == 1980 and d["has_energy_counter"] is True
    assert (d["nvml_index"], d["matched_by"]) == (0, "index")


def test_nvml_without_a_driver_is_unsupported_and_try_open_gives_none(monkeypatch):
    import pytest

    from softbench.core import nvml
    from softbench.core.errors import UnsupportedError

    fake = _FakeNvml()

    def no_driver():
        raise fake.NVMLError("Driver Not Loaded")

    fake.nvmlInit = no_driver
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    with pytest.raises(UnsupportedError, match="no NVIDIA driver here"):
        nvml.Nvml.open()
    assert nvml.Nvml.try_open() is None


def test_the_sampler_keeps_its_schedule_whatever_a_reading_costs():
    """A reading that takes 30 ms, every 50 ms: the sampler waits out the rest of each interval, so the readings
    stay 50 ms apart (not 80 ms, the reading's time added to every interval)."""
    import statistics
    import time

    from softbench.core.nvml import GpuReading, PowerSampler

    def slow_source():
        time.sleep(0.03)
        return GpuReading(time.monotonic(), None, None, None, 100.0, 0)

    sampler = PowerSampler(slow_source, interval_s=0.05)
    sampler.start()
    time.sleep(0.6)
    times = [r.time_s for r in sampler.stop()]
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert len(gaps) >= 5 and statistics.median(gaps) < 0.065


def test_the_cuda_uuid_is_spelled_as_nvml_spells_it(monkeypatch):
    """torch gives a device's UUID bare on some versions and with NVML's GPU-/MIG- prefix on others; NVML finds a
    board only by its prefixed UUID, and a MIG slice keeps its own prefix."""
    import torch

    from softbench.core import nvml

    uuid = {"value": "8c1d4f2e-0000"}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: types.SimpleNamespace(uuid=uuid["value"]))
    assert nvml.cuda_device_uuid() == "GPU-8c1d4f2e-0000"
    for spelled in ("GPU-8c1d4f2e-0000", "MIG-8c1d4f2e-0000"):
        uuid["value"] = spelled
        assert nvml.cuda_device_uuid() == spelled
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert nvml.cuda_device_uuid() is None
