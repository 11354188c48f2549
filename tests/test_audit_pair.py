"""tools/analysis/audit_pair.py: two audits' counters side by side, read from the H200's and the H100's FP8 causal
8K audits under the same FP8 default (20261204T120024Z, 20261205T122700Z)."""

import json
from pathlib import Path

from tests.repo_tools import load_tool

SESSIONS = Path(__file__).resolve().parents[1] / "sessions"
H200 = SESSIONS / "20261204T120024Z-audit-fp8-8K-causal-b1h16d128-triton"
H100 = SESSIONS / "20261205T122700Z-audit-fp8-8K-causal-b1h16d128-triton"
audit_pair = load_tool("analysis/audit_pair.py")


def _row(text: str, kernel: str, counter: str) -> list[str]:
    section = text.split(f"\n{kernel}:\n", 1)[1].strip("\n").split("\n\n", 1)[0]
    (row,) = [r for r in section.splitlines() if r.startswith(f"| {counter} |")]
    return [c.strip() for c in row.strip("|").split("|")]


def test_the_counters_are_the_audits_own():
    text = audit_pair.report(H200, H100, 0.02)
    h200 = json.loads((H200 / "summary.json").read_text())["ncu"]
    h100 = json.loads((H100 / "summary.json").read_text())["ncu"]
    assert "on the NVIDIA H200" in text and "on the NVIDIA H100 80GB HBM3" in text
    assert "CONFIGURATIONS DIFFER" not in text  # both under the FP8 default
    _, a, b, moved = _row(text, "noexp", "SM active cycles (mean over SMs)")
    assert a == f"{h200['noexp']['sm_active_cycles_mean']:,.0f}"
    assert b == f"{h100['noexp']['sm_active_cycles_mean']:,.0f}"
    expected = (h100["noexp"]["sm_active_cycles_mean"] / h200["noexp"]["sm_active_cycles_mean"] - 1) * 100
    assert moved == f"{expected:+.1f}%"
    _, a, b, moved = _row(text, "h15-folded", "L2 hit rate, %")  # a percentage moves in points
    assert moved == f"{h100['h15-folded']['l2_hit_rate_pct'] - h200['h15-folded']['l2_hit_rate_pct']:+.1f} pp"


def test_a_stall_reason_is_listed_where_it_moves():
    """FA3's long-scoreboard stalls are the same on both boards (0.804 and 0.810 per issued instruction), noexp's
    rise by 0.29: at a threshold of 0.02 one is listed and the other not; at 0.5 neither."""
    text = audit_pair.report(H200, H100, 0.02)
    assert _row(text, "noexp", "stalls per issued instruction: long_scoreboard")[3].startswith("+0.2")
    assert "long_scoreboard" not in text.split("\nref-fa3:\n", 1)[1]
    assert "long_scoreboard" not in audit_pair.report(H200, H100, 0.5)


def test_a_folder_without_counters_is_one_sentence(capsys):
    latency = next(SESSIONS.glob("20261205T162746Z-latency-*"))
    assert audit_pair.main([str(H200), str(latency)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no audit with Nsight Compute counters" in err
    assert audit_pair.main([str(H200), "/nonexistent-audit"]) == 2
    assert "not a readable session" in capsys.readouterr().err
