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
    monkeypatch.setattr(nvml, "cuda_device_uuid", lambda: None)  # no CUDA in this process: NVML's board 0
    assert (nvml.Nvml().handle, nvml.Nvml().matched_by) == ("GPU-a", "index")
    monkeypatch.setattr(nvml, "cuda_device_uuid", lambda: "GPU-z")  # a UUID NVML does not know
    assert nvml.Nvml().handle == "GPU-a"
