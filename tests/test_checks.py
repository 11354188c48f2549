"""Checks made before a command starts: output folders that cannot be written, inputs that cannot fit."""

from __future__ import annotations

import os

import pytest

from softbench.core.checks import (check_memory, check_out_dir, check_out_file, estimate_input_bytes,
                                   estimate_sim_bytes, format_bytes)
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


def test_input_estimate_counts_each_tensor_in_its_dtype_and_the_fp32_draw():
    s = Shape(dtype="bf16", seq=1024, heads=4, kv_heads=2, head_dim=64, batch=1)
    per_head = 1024 * 64
    assert estimate_input_bytes(s) == (4 + 2 * 2) * per_head * 2 + 4 * per_head * 4
    fp8 = Shape(dtype="fp8", seq=1024, heads=4, kv_heads=2, head_dim=64)
    assert estimate_input_bytes(fp8) == (4 + 2 * 2) * per_head * 1 + 4 * per_head * 4
    assert estimate_sim_bytes(s) == 1024 * 4 * 4 * (4 * 64 + 6 * 128)


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


def test_format_bytes():
    assert format_bytes(512) == "512 B" and format_bytes(1536) == "1.5 KiB" and format_bytes(5 * 2**40) == "5.0 TiB"
