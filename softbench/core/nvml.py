"""The one boundary to NVML (nvidia-ml-py). Nothing else in softbench imports pynvml.

NVML errors become softbench errors in one place (`_nvml_call`); the rest of the code asks questions
("does this GPU have an energy counter?") instead of catching library exceptions."""

from __future__ import annotations

import functools
import threading
import time
from dataclasses import asdict, dataclass
from typing import Callable

from softbench.core.errors import MeasurementError, UnsupportedError

# clock-event (throttle) reason bits from nvml.h; named so that records say why, not just that
THROTTLE_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# reasons that lower the clock under load; idle and application-clock settings are not throttling
THROTTLING_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80


def throttle_names(bits: int) -> list[str]:
    return [name for bit, name in THROTTLE_BITS.items() if bits & bit]


def is_throttled(bits: int | None) -> bool:
    return bool(bits) and bool(bits & THROTTLING_MASK)


def _import_pynvml():
    try:
        import pynvml
    except ImportError:
        raise UnsupportedError("NVML is not available: the nvidia-ml-py package is not installed",
                               hint="pip install nvidia-ml-py") from None
    return pynvml


def _nvml_call(fn: Callable) -> Callable:
    """Turn NVML library errors into MeasurementError with the function's name."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        pynvml = _import_pynvml()
        try:
            return fn(*args, **kwargs)
        except pynvml.NVMLError as e:
            raise MeasurementError(f"NVML {fn.__name__} failed: {e}") from None

    return wrapper


@dataclass(frozen=True)
class GpuReading:
    """One reading of the board's state. Units are in the field names."""

    time_s: float
    sm_clock_mhz: int | None
    mem_clock_mhz: int | None
    temperature_c: int | None
    power_w: float | None
    throttle_bits: int | None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["throttle_reasons"] = throttle_names(self.throttle_bits or 0)
        d["throttled"] = is_throttled(self.throttle_bits)
        return d


def cuda_device_uuid() -> str | None:
    """The UUID of this process's CUDA device 0 as NVML spells it (GPU-...), where torch sees a GPU."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        uuid = str(torch.cuda.get_device_properties(0).uuid)
    except (ImportError, AttributeError, RuntimeError):
        return None
    return uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"


class Nvml:
    """An initialized NVML handle on one GPU. Use `Nvml.open()`; it raises UnsupportedError where NVML is missing.

    `index` None (the default) is the board this process's CUDA device 0 runs on, found by its UUID: NVML numbers
    every GPU of the host and ignores CUDA_VISIBLE_DEVICES, so under `latency --gpus` (each rank pinned to one GPU)
    NVML's index 0 would be another rank's board. `matched_by` says how the board was found."""

    def __init__(self, index: int | None = None):
        self.pynvml = _import_pynvml()
        try:
            self.pynvml.nvmlInit()
        except self.pynvml.NVMLError as e:
            raise UnsupportedError(f"NVML could not be initialized (no NVIDIA driver here?): {e}") from None
        self.handle, self.matched_by = None, "index"
        if index is None:
            uuid = cuda_device_uuid()
            if uuid is not None:
                try:
                    self.handle = self.pynvml.nvmlDeviceGetHandleByUUID(uuid)
                    self.matched_by = "cuda device 0 uuid"
                except self.pynvml.NVMLError:
                    pass
        if self.handle is None:
            self.handle = self.pynvml.nvmlDeviceGetHandleByIndex(index or 0)
        self.index = self._maybe(self.pynvml.nvmlDeviceGetIndex)

    @classmethod
    def open(cls, index: int | None = None) -> "Nvml":
        return cls(index)

    @classmethod
    def try_open(cls, index: int | None = None) -> "Nvml | None":
        try:
            return cls(index)
        except UnsupportedError:
            return None

    def _maybe(self, fn, *args):
        # a single missing field (e.g. power on some boards) must not lose the whole reading
        try:
            return fn(self.handle, *args)
        except self.pynvml.NVMLError:
            return None

    def read(self) -> GpuReading:
        p = self.pynvml
        power_mw = self._maybe(p.nvmlDeviceGetPowerUsage)
        reasons_fn = getattr(p, "nvmlDeviceGetCurrentClocksEventReasons", None) or p.nvmlDeviceGetCurrentClocksThrottleReasons
        return GpuReading(
            time_s=time.monotonic(),
            sm_clock_mhz=self._maybe(p.nvmlDeviceGetClockInfo, p.NVML_CLOCK_SM),
            mem_clock_mhz=self._maybe(p.nvmlDeviceGetClockInfo, p.NVML_CLOCK_MEM),
            temperature_c=self._maybe(p.nvmlDeviceGetTemperature, p.NVML_TEMPERATURE_GPU),
            power_w=None if power_mw is None else power_mw / 1000.0,
            throttle_bits=self._maybe(reasons_fn),
        )

    def has_energy_counter(self) -> bool:
        return self._maybe(self.pynvml.nvmlDeviceGetTotalEnergyConsumption) is not None

    @_nvml_call
    def total_energy_j(self) -> float:
        """NVML's total-energy counter (millijoules since driver load), in joules."""
        return self.pynvml.nvmlDeviceGetTotalEnergyConsumption(self.handle) / 1000.0

    def describe(self) -> dict:
        p = self.pynvml

        def text(v):
            return v.decode() if isinstance(v, bytes) else v

        limit = self._maybe(p.nvmlDeviceGetEnforcedPowerLimit)
        return {
            "name": text(self._maybe(p.nvmlDeviceGetName)),
            "driver": text(self._maybe_global(p.nvmlSystemGetDriverVersion)),
            "uuid": text(self._maybe(p.nvmlDeviceGetUUID)),
            "nvml_index": self.index, "matched_by": self.matched_by,
            "power_limit_w": None if limit is None else limit / 1000.0,
            "max_sm_clock_mhz": self._maybe(p.nvmlDeviceGetMaxClockInfo, p.NVML_CLOCK_SM),
            "persistence_mode": self._maybe(p.nvmlDeviceGetPersistenceMode),
            "has_energy_counter": self.has_energy_counter(),
        }

    def _maybe_global(self, fn):
        try:
            return fn()
        except self.pynvml.NVMLError:
            return None


class PowerSampler:
    """Samples `source()` every `interval_s` on a thread between start() and stop(); returns the readings.
    `source` is any zero-argument callable returning a GpuReading (NVML in use, a replay in tests)."""

    def __init__(self, source: Callable[[], GpuReading], interval_s: float = 0.1):
        if interval_s <= 0:
            raise ValueError("sampling interval must be positive")
        self.source = source
        self.interval_s = interval_s
        self._samples: list[GpuReading] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("sampler already started")
        self._thread = threading.Thread(target=self._run, name="softbench-power-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            try:
                self._samples.append(self.source())
            except BaseException as e:  # surfaced by stop(), never swallowed
                self._error = e
                return
            next_t += self.interval_s
            self._stop.wait(max(0.0, next_t - time.monotonic()))

    def stop(self) -> list[GpuReading]:
        if self._thread is None:
            raise RuntimeError("sampler was never started")
        self._stop.set()
        self._thread.join()
        if self._error is not None:
            raise MeasurementError(f"power sampling failed: {self._error}")
        return list(self._samples)
