"""tools/analysis/tensor_idle_fit.py: the idle share split into the loop's and each block's, on audit summaries
written here with known shares."""
from __future__ import annotations

import json

import pytest

from repo_tools import load_tool

idle_fit = load_tool("analysis/tensor_idle_fit.py")
CONFIG = idle_fit.DEFAULT_CONFIG


def _audit(root, name, seq, shares, *, config=CONFIG, dtype="bf16", causal=True, complete=True, heads=16):
    d = root / f"{name}-audit-{dtype}-x"
    d.mkdir()
    shape = {"dtype": dtype, "seq": seq, "causal": causal, "batch": 1, "heads": heads, "head_dim": 128}
    summary = {"shape": shape, "kernel_config": {"A0": config},
               "ncu": {k: {"tensor_active_pct": v} for k, v in shares.items()}}
    (d / "summary.json").write_text(json.dumps(summary))
    (d / "status.json").write_text(json.dumps({"complete": complete}))


def test_mean_tiles_of_a_causal_block():
    assert idle_fit.mean_tiles(8192) == 32.5 and idle_fit.mean_tiles(16384) == 64.5 and idle_fit.mean_tiles(130) == 1.5


def test_the_fit_recovers_the_loop_and_block_shares(tmp_path, capsys):
    loop, per_block = 9.0, 240.0  # idle % = 9 + 240 / T
    for k, seq in enumerate((4096, 8192, 16384, 32768)):
        idle = loop + per_block / idle_fit.mean_tiles(seq)
        _audit(tmp_path, f"2026120{k + 1}T000000Z", seq, {"A0": 100 - idle, "ref-fa3": 100 - idle + 1.0})
    # left out: another configuration, another dtype, non-causal, another shape, an unfinished session
    _audit(tmp_path, "20261210T000000Z", 8192, {"A0": 50.0}, config="gluon-other")
    _audit(tmp_path, "20261211T000000Z", 8192, {"A0": 50.0}, dtype="fp8")
    _audit(tmp_path, "20261212T000000Z", 8192, {"A0": 50.0}, causal=False)
    _audit(tmp_path, "20261213T000000Z", 8192, {"A0": 50.0}, heads=8)
    _audit(tmp_path, "20261214T000000Z", 8192, {"A0": 50.0}, complete=False)
    found = idle_fit.points(tmp_path, "bf16", CONFIG)
    assert sorted(found) == ["A0", "ref-fa3"] and len(found["A0"]) == 4
    a, b = idle_fit.fit(found["A0"])
    assert a == pytest.approx(loop) and b == pytest.approx(per_block)
    a, b = idle_fit.fit(found["ref-fa3"])  # one point less idle at every length: the loop's share drops by 1
    assert a == pytest.approx(loop - 1.0) and b == pytest.approx(per_block)
    assert idle_fit.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "A0: 4K" in out and "idle % = 9.00 + 240 / T" in out and "2.40 tiles" in out


def test_one_length_gives_no_fit_and_nothing_read_says_so(tmp_path, capsys):
    _audit(tmp_path, "20261201T000000Z", 8192, {"A0": 84.0})
    assert idle_fit.fit(idle_fit.points(tmp_path, "bf16", CONFIG)["A0"]) is None
    assert idle_fit.main([str(tmp_path)]) == 0 and "one length only" in capsys.readouterr().out
    assert idle_fit.main([str(tmp_path), "--dtype", "fp8"]) == 1 and "no complete causal fp8" in capsys.readouterr().out
