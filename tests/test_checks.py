"""Checks made before a command starts: output folders that cannot be written, inputs that cannot fit."""

from __future__ import annotations

import os

import pytest

from softbench.core.checks import (available_memory_bytes, check_memory, check_out_dir, check_out_file,
                                   check_sim_time, estimate_input_bytes, estimate_sim_bytes, format_bytes)
from softbench.core.errors import UsageError
from softbench.core.shapes import Shape


def test_out_dir_under_a_file_or_on_a_file_is_refused_and_nothing_is_made(tmp_path):
    f = tmp_path / "somefile"
    f.write_text("x")
    with pytest.raises(UsageError, match="lies under .*somefile, which is a file"):
        check_out_dir(f / "sub" / "deeper")
    with pytest.raises(UsageError, match="is a file, not a folder"):
        check_out_dir(f)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["somefile"]


def test_a_folder_still_to_be_made_is_accepted_without_making_it(tmp_path):
    assert check_out_dir(tmp_path / "a" / "b") == tmp_path / "a" / "b"
    assert list(tmp_path.iterdir()) == [], "the check makes nothing and leaves no probe behind"


def test_read_only_places_are_refused():
    # /proc takes no new files, even from root (a chmod'ed folder would not stop root)
    with pytest.raises(UsageError, match="cannot be written"):
        check_out_dir("/proc/softbench-out")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder_is_refused(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        with pytest.raises(UsageError, match="cannot be written"):
            check_out_dir(ro / "sessions")
    finally:
        ro.chmod(0o755)


def test_out_file_must_not_be_a_folder_and_its_folder_must_be_writable(tmp_path):
    with pytest.raises(UsageError, match="is a folder, not a file"):
        check_out_file(tmp_path, "--json")
    (tmp_path / "f").write_text("")
    with pytest.raises(UsageError, match="--json .*which is a file"):
        check_out_file(tmp_path / "f" / "ev.json", "--json")
    assert check_out_file(tmp_path / "ev.json", "--json") == tmp_path / "ev.json"


def test_an_existing_out_file_is_accepted_and_a_blank_path_is_refused(tmp_path):
    (tmp_path / "ev.json").write_text("{}")  # written over, as a run again writes it
    assert check_out_file(tmp_path / "ev.json", "--json") == tmp_path / "ev.json"
    for blank in ("", "  "):
        with pytest.raises(UsageError, match="--json is empty"):
            check_out_file(blank, "--json")
        with pytest.raises(UsageError, match="--out is empty"):
            check_out_dir(blank)


def test_input_estimate_counts_each_tensor_in_its_dtype_and_the_fp32_draw():
    s = Shape(dtype="bf16", seq=1024, heads=4, kv_heads=2, head_dim=64, batch=1)
    per_head = 1024 * 64
    assert estimate_input_bytes(s) == (4 + 2 * 2) * per_head * 2 + 4 * per_head * 4
    fp8 = Shape(dtype="fp8", seq=1024, heads=4, kv_heads=2, head_dim=64)
    assert estimate_input_bytes(fp8) == (4 + 2 * 2) * per_head * 1 + 4 * per_head * 4
    assert estimate_sim_bytes(s) == 1024 * 4 * 4 * (4 * 64 + 6 * 128)
    short = Shape(dtype="bf16", seq=64, heads=4, kv_heads=2, head_dim=64)  # one score tile of 64 keys, not 128
    assert estimate_sim_bytes(short) == 64 * 4 * 4 * (4 * 64 + 6 * 64)


def test_memory_refusal_gives_the_number():
    huge = Shape(seq=1_000_000_000, heads=16, head_dim=128)
    with pytest.raises(UsageError) as e:
        check_memory(huge, "fa4", available=64 * 2**30)
    msg = str(e.value)
    assert "seq 1000000000 needs about" in msg and "TiB" in msg and "64.0 GiB is available" in msg
    assert "simulation" not in msg
    with pytest.raises(UsageError, match="inputs and the simulation's work"):
        check_memory(huge, "sim", available=64 * 2**30)
    small = Shape(seq=256, heads=2)
    assert check_memory(small, "sim", available=64 * 2**30) == estimate_input_bytes(small) + estimate_sim_bytes(small)
    # the caller's own extra (e.g. a gate's read-back probabilities) is added
    with pytest.raises(UsageError, match="the multi-tile gate"):
        check_memory(small, "sim", extra_bytes=2**40, what="the multi-tile gate", available=64 * 2**30)


def test_memory_that_just_fits_is_accepted_and_only_the_simulation_adds_its_work():
    s = Shape(seq=256, heads=2)
    need = estimate_input_bytes(s) + estimate_sim_bytes(s)
    assert check_memory(s, "sim", available=need) == need
    with pytest.raises(UsageError):
        check_memory(s, "sim", available=need - 1)
    for backend in ("fa4", "triton"):
        assert check_memory(s, backend, available=estimate_input_bytes(s)) == estimate_input_bytes(s)


@pytest.mark.skipif(not os.path.exists("/proc/meminfo"), reason="Linux only")
def test_available_memory_is_meminfos_kib_in_bytes():
    def kib():
        with open("/proc/meminfo", encoding="ascii") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("MemAvailable:"))

    for _ in range(20):  # the figure moves; take a read between two equal ones
        before, got, after = kib(), available_memory_bytes(), kib()
        if before == after:
            assert got == before * 1024
            return
    pytest.skip("MemAvailable kept moving")


def test_simulation_time_counts_every_call_of_a_window_and_accepts_the_limit_itself():
    import types

    import torch

    if torch.cuda.is_available():
        pytest.skip("the simulation runs on the GPU here, where no time is refused")
    # 4 * 2500^2 * 16 = 4e8 FLOP a call; 375 calls at 5 GFLOP/s: exactly the 30 s limit
    at_limit = Shape(seq=2500, heads=1, head_dim=16, causal=False)
    check_sim_time([at_limit], types.SimpleNamespace(calls=375))
    with pytest.raises(UsageError, match="one window of 376 simulated calls"):
        check_sim_time([at_limit], types.SimpleNamespace(calls=376))
    # one call of 0.86 s is nothing; a window of 100 is 86 s
    with pytest.raises(UsageError, match="one window of 100 simulated calls would take at least 86 s"):
        check_sim_time([Shape(seq=4096, heads=1, head_dim=64, causal=False)], types.SimpleNamespace(calls=100))


def test_format_bytes():
    assert format_bytes(512) == "512 B" and format_bytes(1536) == "1.5 KiB" and format_bytes(5 * 2**40) == "5.0 TiB"
    assert format_bytes(1023) == "1023 B" and format_bytes(1024) == "1.0 KiB" and format_bytes(-2048) == "-2.0 KiB"
    assert format_bytes(2**60) == "1024.0 PiB"  # the largest unit holds whatever is left
