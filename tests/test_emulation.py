"""FA4's exp2 emulation fraction (beta), the sweep protocol, the forcing patch, and the sweep commands."""

import json
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from conftest import fa4_installed
from softbench.core.errors import PatchError, UsageError
from softbench.kernels.patch import apply_edits
from softbench.sweep import emulation as emu
from softbench.sweep.emulation import EmulationSetting, load_sweep, parse_variant

ROOT = Path(__file__).resolve().parents[1]
PAPER_FILE = ROOT / "softbench" / "protocols" / "emulation-sweep-paper.yaml"
# Table B5d's beta column, in the table's order
PAPER_BETA_PCT = (0.0, 12.5, 25.0, 37.5, 50.0, 50.0, 75.0, 75.0)


def test_beta_of_every_paper_setting_comes_from_the_predicate():
    sweep = load_sweep(PAPER_FILE)
    settings = [(s.freq, s.start_frg) for s in sweep.settings]
    assert settings == [(0, 1), (16, 1), (8, 1), (8, 0), (2, 1), (4, 1), (2, 0), (4, 0)]
    assert tuple(s.beta_pct for s in sweep.settings) == PAPER_BETA_PCT
    # the protocol file's recorded paper column agrees as well
    assert tuple(s.paper_beta_pct for s in sweep.settings) == PAPER_BETA_PCT


def _beta_factored(freq, start, res=4, frg_cnt=4):
    """An independent form: for freq > 0 a pair is emulated iff its k is (k % freq >= freq - res) AND its
    fragment is one of start..frg_cnt-2, so beta is the product of the two shares."""
    if freq == 0:
        return Fraction(0)
    ks = [k for k in range(0, 32, 2) if k % freq >= freq - res]
    js = [j for j in range(frg_cnt) if start <= j < frg_cnt - 1]
    return Fraction(len(ks), 16) * Fraction(len(js), frg_cnt)


@pytest.mark.parametrize("freq", [0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 32, 64])
@pytest.mark.parametrize("start", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("res", [0, 2, 4, 6])
def test_beta_matches_the_factored_form(freq, start, res):
    assert EmulationSetting(freq, start, res).beta == _beta_factored(freq, start, res)


def test_beta_by_counting_pairs_for_the_stock_fp8_setting():
    # freq 8 / start 1: fragments 1 and 2 emulate the pairs k = 4, 6, 12, 14, 20, 22, 28, 30 -> 16 of 64 pairs
    emulated = [(k, j) for j in range(4) for k in range(0, 32, 2) if not emu.hardware_exp2(k, j, 8, 1)]
    assert sorted({k for k, _ in emulated}) == [4, 6, 12, 14, 20, 22, 28, 30]
    assert sorted({j for _, j in emulated}) == [1, 2]
    assert len(emulated) == 16


def test_more_columns_means_more_fragments():
    # 256 columns = 8 fragments: the last one always uses hardware, fragments start..6 may emulate
    s = EmulationSetting(2, 0, columns=256)
    assert s.frg_cnt == 8 and s.beta == Fraction(7, 8)


def test_one_fragment_is_a_setting_and_never_emulates():
    # 32 columns (the smallest multiple of a fragment) hold one fragment, which is also the last: FA4 leaves the
    # last fragment on hardware exp2, so nothing is emulated whatever freq asks
    s = EmulationSetting(2, 0, columns=emu.FRAGMENT)
    assert s.frg_cnt == 1 and s.beta == 0


@pytest.mark.parametrize("bad", [dict(freq=-1, start_frg=0), dict(freq=8, start_frg=-1), dict(freq=8, start_frg=1, res=-2),
                                 dict(freq=8, start_frg=1, columns=100), dict(freq=2.5, start_frg=1),
                                 dict(freq=True, start_frg=1),
                                 # a setting built in code, not read from a file, is held to the same label rule
                                 dict(freq=8, start_frg=1, label=5),
                                 # no columns at all: no pair to take a share of (beta would divide by zero)
                                 dict(freq=8, start_frg=1, columns=0)])
def test_bad_settings_are_refused(bad):
    with pytest.raises(UsageError):
        EmulationSetting(**bad)


def test_variant_names_round_trip():
    for s in (EmulationSetting(8, 1), EmulationSetting(0, 0), EmulationSetting(16, 1, res=2)):
        back = parse_variant(s.variant)
        assert (back.freq, back.start_frg, back.res) == (s.freq, s.start_frg, s.res)
    assert EmulationSetting(8, 1).variant == "emu-f8-s1"
    assert EmulationSetting(8, 1, res=2).variant == "emu-f8-s1-r2"
    assert parse_variant("A1") is None and parse_variant("emu-f8") is None


def test_a_setting_describes_itself_by_its_label_or_by_what_differs_from_stock():
    """describe() names a row of the sweep's table and the patch: a label is printed as given; otherwise freq 0
    says that nothing is emulated (start and res mean nothing there), res is named only off its default, and the
    setting stock FA4 picks is marked."""
    assert EmulationSetting(8, 1, label="my row").describe() == "my row"
    assert "hardware exp2 only" in EmulationSetting(0, 1).describe()
    assert "start" not in EmulationSetting(0, 1).describe()
    assert "res 2" in EmulationSetting(8, 1, res=2).describe()
    assert "res" not in EmulationSetting(8, 1).describe()
    assert "(stock)" in EmulationSetting(8, 1, stock=True).describe()
    assert "(stock)" not in EmulationSetting(8, 1).describe()


def test_a_settings_record_holds_its_exact_beta_and_reads_back_as_the_setting():
    # the record (sessions keep it as JSON) carries beta exactly, as a fraction, beside the rounded percentage
    s = EmulationSetting(16, 1, res=2)
    d = json.loads(json.dumps(s.to_dict()))
    assert Fraction(d["beta_fraction"]) == s.beta and d["beta_pct"] == float(s.beta * 100)
    assert parse_variant(d["variant"]) == s and d["description"] == s.describe()


def _fake_sm100_source() -> str:
    return ("class K:\n    def __call__(self, mCuSeqlensQ, mSeqUsedQ):\n        self._setup_attributes()\n"
            + emu._SETTINGS_BLOCK + "\n        softmax.apply_exp2_convert(\n            tSrS_t2r,\n            tSrP_r2t,\n"
            "            ex2_emu_freq=self.ex2_emu_freq,\n" + emu._CALL_ARG + "        )\n")


def test_patch_forces_the_setting_after_the_tuning_table():
    src = {"cute/flash_fwd_sm100.py": _fake_sm100_source()}
    out = apply_edits(src, emu.emulation_patch(EmulationSetting(4, 0)))["cute/flash_fwd_sm100.py"]
    block_end = out.index(emu._SETTINGS_BLOCK) + len(emu._SETTINGS_BLOCK)
    forced = out[block_end:]
    assert forced.index("self.ex2_emu_freq = 4\n") < forced.index("self.ex2_emu_start_frg = 0\n") < forced.index("apply_exp2_convert")
    assert "ex2_emu_res" not in out  # res 4 is apply_exp2_convert's default: the call stays as it was


def test_patch_passes_a_non_default_res_to_the_call():
    src = {"cute/flash_fwd_sm100.py": _fake_sm100_source()}
    out = apply_edits(src, emu.emulation_patch(EmulationSetting(8, 1, res=2)))["cute/flash_fwd_sm100.py"]
    assert "            ex2_emu_res=2,\n        )" in out


def test_patch_refuses_sources_without_the_anchor():
    src = {"cute/flash_fwd_sm100.py": _fake_sm100_source().replace("self.ex2_emu_freq = 0\n", "self.ex2_emu_freq = 1\n")}
    with pytest.raises(PatchError, match="sm100-ex2-emu-settings"):
        apply_edits(src, emu.emulation_patch(EmulationSetting(8, 1)))


@pytest.mark.fa4source
@pytest.mark.skipif(not fa4_installed(), reason="needs flash-attn-4 4.0.0b36 sources")
def test_every_paper_setting_applies_to_the_installed_fa4():
    for s in load_sweep(PAPER_FILE).settings:
        assert emu.check_patch_applies(s) is None, s.variant
    assert emu.check_patch_applies(EmulationSetting(8, 1, res=2)) is None


def test_an_emulation_setting_off_the_sm_100_family_is_refused_not_run_as_the_stock_kernel(monkeypatch):
    """The patch edits only flash_fwd_sm100.py: on sm_90 `latency --variant emu-f8-s1` ran the stock kernel under
    the emulation's name (only `sweep` asked capability.fa4_emulation_reason)."""
    import sys

    from softbench.core.errors import UnsupportedError
    from softbench.kernels.fa4 import FA4Backend
    from test_capability import H200

    monkeypatch.delitem(sys.modules, "flash_attn", raising=False)  # as in a fresh worker process
    with pytest.raises(UnsupportedError, match=r"^variant emu-f8-s1 changes only FA4's sm_100 and sm_110 forward; "
                                               r"on sm_90 it would silently be the stock kernel$"):
        FA4Backend(target=H200).load("emu-f8-s1")


def test_registering_by_name_is_idempotent_and_unknown_names_are_refused():
    from softbench.kernels.fa4_patches import FA4_PATCHES

    info = emu.ensure_registered("emu-f16-s1")
    assert info["setting"]["beta_pct"] == 12.5
    assert FA4_PATCHES.get("emu-f16-s1").name == "emu-f16-s1"
    assert emu.ensure_registered("emu-f16-s1")["variant"] == "emu-f16-s1"
    assert emu.ensure_registered("A1")["patch"] == "rowmax-h15"  # existing variants pass through
    with pytest.raises(UsageError, match="unknown kernel variant 'emu-fast'"):
        emu.ensure_registered("emu-fast")
    with pytest.raises(UsageError, match="built by the triton backend, not by fa4"):
        emu.ensure_registered("h15-proved")


@pytest.mark.parametrize("text, match", [
    ("settings: []\n", "non-empty"),
    ("settings: [{freq: 8, start_frg: 1}]\nbogus: 1\n", "unknown keys"),
    ("settings: [{freq: 8, start_frg: 1}, {freq: 8, start_frg: 1}]\n", r"s\.yaml names emu-f8-s1 more than once"),
    ("settings: [{freq: 8, start: 1}]\n", "settings\\[0\\]"),
    # a row that is no mapping (a number: `"label" in 5` raised TypeError before the row was read)
    ("settings: [{freq: 8, start_frg: 1}, 5]\n", r"settings\[1\] must be a mapping"),
    # a label of spaces prints as a blank row name, as an empty one would
    ("settings: [{freq: 8, start_frg: 1, label: '  '}]\n", r"settings\[0\]: label must be non-empty text"),
    ("shape: {dtype: fp4}\nsettings: [{freq: 8, start_frg: 1}]\n", "dtype"),
])
def test_bad_sweep_files_are_refused(tmp_path, text, match):
    f = tmp_path / "s.yaml"
    f.write_text(text)
    with pytest.raises(UsageError, match=match):
        load_sweep(f)


def test_dry_run_prints_every_setting_and_runs_nothing(cli, tmp_path):
    r = cli("sweep", "emulation", "--dry-run", "--out", str(tmp_path), env={"COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    for s in load_sweep(PAPER_FILE).settings:
        assert s.variant in r.stdout
    for pct in ("12.5%", "37.5%", "75%"):
        assert pct in r.stdout
    assert "nothing was measured" in r.stderr
    assert not any(tmp_path.iterdir())  # no session


def test_real_sweep_refuses_without_sm100(cli, tmp_path):
    r = cli("sweep", "emulation", "--out", str(tmp_path))
    assert r.returncode == 3
    assert "sm_100" in r.stderr and "sweep variants" in r.stderr
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_sweep_variants_with_the_simulation_end_to_end(cli, tmp_path):
    r = cli("sweep", "variants", "--backend", "sim", "--protocol", "paper", "--seq", "128", "--heads", "2", "--variants", "A1,noexp",
            "--rounds", "1", "--windows", "2", "--calls", "1", "--warmup", "1", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    sweeps = sorted(tmp_path.glob("*-sweep-variants-*"))
    latencies = sorted(tmp_path.glob("*-latency-*"))
    assert len(sweeps) == 1 and len(latencies) == 2
    summary = json.loads((sweeps[0] / "summary.json").read_text())
    assert summary["command"] == "sweep" and summary["complete"]
    rows = summary["rows"]
    assert {r["variant"] for r in rows} == {"A1", "noexp"}
    speedups = [r["speedup_pct"] for r in rows]
    assert speedups == sorted(speedups, reverse=True)
    for row in rows:
        lat = json.loads((tmp_path / row["session"] / "summary.json").read_text())
        assert lat["speedup_pct"] == row["speedup_pct"] and lat["variant"] == row["variant"]
        # each median from its own kernel's timings: the baseline's under A0, the variant's under its name
        assert row["baseline_median_ms"] == lat["median_ms"]["A0"]
        assert row["variant_median_ms"] == lat["median_ms"][row["variant"]]
        assert row["baseline_median_ms"] != row["variant_median_ms"]
        # the roles come from the kernel specs, also where the sweep keeps one baseline process for every variant
        recorded = yaml.safe_load((tmp_path / row["session"] / "protocol.yaml").read_text())
        assert recorded["roles"] == {"A0": "baseline", row["variant"]: "variant"}
    assert (sweeps[0] / "results.jsonl").read_text().count("\n") == 2
    assert json.loads((sweeps[0] / "status.json").read_text())["complete"] is True
    from test_vocabulary import assert_covered

    for session in sweeps + latencies:  # what they record, a seal can scope
        assert_covered(session)


def test_sweep_rows_are_fastest_first_and_failed_variants_are_kept_last_in_their_order():
    """The table a sweep prints and keeps: -1.0, +4.0 and +2.5 % sort to +4.0, +2.5, -1.0; the two variants that
    failed (no speed-up) follow in the order they ran, never dropped from the record."""
    from softbench.sweep.engine import sorted_rows

    rows = [{"variant": "a", "speedup_pct": -1.0}, {"variant": "x", "error": "E1"},
            {"variant": "b", "speedup_pct": 4.0}, {"variant": "y", "error": "E2"},
            {"variant": "c", "speedup_pct": 2.5}]
    assert [r["variant"] for r in sorted_rows(rows)] == ["b", "c", "a", "x", "y"]


def test_a_sweep_with_one_failed_variant_ends_with_an_error(tmp_path):
    """One failure in three is enough for an error exit, and the message counts and names it."""
    from softbench.core.errors import MeasurementError
    from softbench.core.session import Session
    from softbench.sweep.engine import raise_for_failures

    sweep = Session.create(tmp_path, "sweep", "t")
    rows = [{"variant": "A1", "speedup_pct": 1.0}, {"variant": "noexp", "error": "E"},
            {"variant": "h15-sat", "speedup_pct": 2.0}]
    sweep.write_json("summary.json", {"rows": rows})
    with pytest.raises(MeasurementError, match="1 of 3 variants failed: noexp"):
        raise_for_failures(sweep)
    sweep.write_json("summary.json", {"rows": [rows[0], rows[2]]})
    raise_for_failures(sweep)  # none failed: no error


def test_a_sweep_whose_baseline_cannot_load_is_left_partial_with_its_reason(tmp_path):
    """The baseline's process fails to load: the sweep session already written is marked partial with the reason,
    not 'running' as if a sweep were still at work on it."""
    from softbench.core.errors import SoftbenchError
    from softbench.core.protocol import LatencyProtocol
    from softbench.core.shapes import Shape
    from softbench.sweep.engine import SweepOptions, run_variant_sweep

    class NoLoad:
        def __init__(self, label, backend, variant, options=None):
            self.label = label

        def load(self):
            raise SoftbenchError("the kernel did not compile")

        def close(self):
            pass

    opts = SweepOptions(shape=Shape(seq=128, heads=2), variants=("A1",), out_dir=tmp_path,
                        protocol=LatencyProtocol(rounds=1, windows=1, calls=1, warmup=0))
    with pytest.raises(SoftbenchError, match="did not compile"):
        run_variant_sweep(opts, worker_factory=NoLoad)
    (sweep,) = tmp_path.iterdir()
    status = json.loads((sweep / "status.json").read_text())
    assert status["state"] == "partial" and not status["complete"]
    summary = json.loads((sweep / "summary.json").read_text())
    assert "did not compile" in summary["incomplete_reason"] and summary["rows"] == []


def test_a_variant_that_fails_to_load_is_recorded_and_the_baseline_process_is_closed(tmp_path):
    """Under the paper's rounds one baseline process serves every variant: a variant that cannot load is a row
    with its error (the sweep goes on and completes), and the baseline's process is closed at the end, not left
    running. A sweep with no variants is refused before anything starts."""
    from softbench.core.errors import SoftbenchError
    from softbench.core.protocol import LatencyProtocol
    from softbench.core.shapes import Shape
    from softbench.sweep.engine import SweepOptions, run_variant_sweep

    closed = []

    class Worker:
        def __init__(self, label, backend, variant, options=None):
            self.label, self.info = label, {}
            self.proc = type("Proc", (), {"poll": lambda self: None})()

        def load(self):
            if self.label != "A0":
                raise SoftbenchError(f"{self.label} did not compile")

        def close(self):
            closed.append(self.label)

    opts = SweepOptions(shape=Shape(seq=128, heads=2), variants=("A1",), out_dir=tmp_path,
                        protocol=LatencyProtocol(rounds=1, windows=1, calls=1, warmup=0))
    sweep = run_variant_sweep(opts, worker_factory=Worker)
    summary = sweep.read_json("summary.json")
    assert summary["complete"] and summary["measured"] == 1
    (row,) = summary["rows"]
    assert row["variant"] == "A1" and row["error"] == "SoftbenchError: A1 did not compile"
    assert sorted(closed) == ["A0", "A1"]
    with pytest.raises(UsageError, match="no variants to sweep"):
        SweepOptions(shape=Shape(seq=128, heads=2), variants=(), out_dir=tmp_path)


def test_emulation_names_in_sweep_variants_need_fa4(capsys):
    from softbench.cli import main

    assert main(["sweep", "variants", "--backend", "sim", "--variants", "A1,emu-f8-s1", "--seq", "128"]) == 2
    assert "exist only with --backend fa4" in capsys.readouterr().err


@pytest.mark.slow
def test_sweep_variants_runs_one_sweep_per_length(tmp_path, cli):
    r = cli("sweep", "variants", "--backend", "sim", "--protocol", "paper", "--seq", "128", "--seq", "256", "--heads", "2",
            "--variants", "A1", "--rounds", "1", "--windows", "1", "--calls", "1", "--warmup", "0",
            "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    sweeps = sorted(tmp_path.glob("*-sweep-variants-*"))
    assert len(sweeps) == 2
    assert sorted(json.loads((s / "summary.json").read_text())["shape"]["seq"] for s in sweeps) == [128, 256]


@pytest.mark.slow  # it imports FA4 and CuTe DSL
def test_the_fa4_backend_loads_an_emulation_setting_by_name_alone():
    """`emu-f16-s1` exists by name only. FA4Backend.load registers it on first use, in a fresh process (the
    registry is per process), so every caller loads it as a named variant: here a cross-compile target, which
    builds the patched tree and imports FA4 from it without a GPU."""
    import subprocess
    import sys

    from softbench.audit import cross

    missing = cross.missing_stack()
    if missing:
        pytest.skip(f"CuTe DSL stack not installed ({missing}); make setup installs it")
    code = ("from softbench.kernels.capability import Device\n"
            "from softbench.kernels.fa4 import FA4Backend\n"
            "from softbench.kernels.fa4_patches import FA4_PATCHES\n"
            "assert 'emu-f16-s1' not in FA4_PATCHES\n"
            "info = FA4Backend(target=Device('cuda', 'B200 target', 100, present=False)).load('emu-f16-s1')\n"
            "print(info['variant'], info['patch']['patch'])\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["emu-f16-s1", "emu-f16-s1"]


ONE_SETTING = "name: t\nsettings: [{freq: 8, start_frg: 1}]\n"


@pytest.mark.parametrize("text, match", [
    (ONE_SETTING + "baseline: NOPE\n", "baseline: unknown kernel variant 'NOPE'"),
    (ONE_SETTING + "baseline: [A0]\n", "baseline must be one variant name"),
    (ONE_SETTING + "baseline: h15-proved\n", "baseline: variant h15-proved is built by the triton backend"),
    (ONE_SETTING + "also_compare: [BOGUS]\n", "also_compare: unknown kernel variant 'BOGUS'"),
    (ONE_SETTING + "also_compare: A1\n", "also_compare must be a list of variant names, got 'A1'"),  # not A, 1
    (ONE_SETTING + "also_compare: [A1, 5]\n", "also_compare must be a list of variant names"),
    ("name: t\nsettings: [{freq: 8, start_frg: 1, label: 5}]\n", r"settings\[0\]: label must be non-empty text, got 5"),
    ("name: t\nsettings: [{freq: 8, start_frg: 1, label: ''}]\n", r"settings\[0\]: label must be non-empty text"),
    ("name: t\nsettings: [{freq: 8, start_frg: 1, paper_beta_pct: abc}]\n",
     r"settings\[0\]: paper_beta_pct must be a number \(a percentage\), got 'abc'"),
    ("name: t\nsettings: [{freq: 8, start_frg: 1, stock: maybe}]\n", r"settings\[0\]: stock must be true or false"),
    # each kernel of a sweep is timed under its own name: a second of one name is refused, not merged
    (ONE_SETTING + "also_compare: [A1, A1]\n", r"s\.yaml names A1 more than once"),
])
def test_a_sweep_file_with_bad_names_or_fields_is_refused_when_read(cli, tmp_path, text, match):
    f = tmp_path / "s.yaml"
    f.write_text(text)
    with pytest.raises(UsageError, match=match):
        load_sweep(f)
    r = cli("sweep", "emulation", "--dry-run", "--protocol", str(f), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and str(f) in r.stderr and "internal error" not in r.stderr, r.stderr
    assert "nothing was measured" not in r.stderr and not (tmp_path / "out").exists()


def test_a_settings_own_res_overrides_the_files(tmp_path):
    """The file's res is every setting's default; a setting that names its own res keeps it."""
    f = tmp_path / "s.yaml"
    f.write_text("res: 2\nsettings: [{freq: 8, start_frg: 1}, {freq: 8, start_frg: 0, res: 4}]\n")
    assert [s.variant for s in load_sweep(f).settings] == ["emu-f8-s1-r2", "emu-f8-s0"]


def test_a_sweep_file_that_gives_only_settings_takes_the_defaults(tmp_path):
    """Left out, res and columns are apply_exp2_convert's res and the S-tile of head dim 128: the settings are
    those a constructor without them builds (beta depends on both); and the settings are timed against the
    catalog's baseline, the stock kernel, with nothing else compared."""
    from softbench.kernels.catalog import get_variant

    f = tmp_path / "s.yaml"
    f.write_text("settings: [{freq: 8, start_frg: 1}, {freq: 2, start_frg: 0}]\n")
    sweep = load_sweep(f)
    assert sweep.settings == (EmulationSetting(8, 1), EmulationSetting(2, 0))
    assert get_variant(sweep.baseline).role == "baseline" and sweep.also_compare == ()


def test_names_in_a_sweep_file_are_read_without_their_spaces(tmp_path):
    # a quoted name with a space around it is the kernel it names, checked and recorded as that name
    f = tmp_path / "s.yaml"
    f.write_text("settings: [{freq: 8, start_frg: 1}]\nbaseline: ' A0 '\nalso_compare: [' A1', 'noexp ']\n")
    sweep = load_sweep(f)
    assert sweep.baseline == "A0" and sweep.also_compare == ("A1", "noexp")
    assert sweep.variants() == ["emu-f8-s1", "A1", "noexp"]


def test_a_sweep_file_naming_another_backends_kernel_offers_no_backend_option(tmp_path):
    """check's hint `--backend triton` is for a command line; a sweep file runs on fa4 whatever the user adds."""
    f = tmp_path / "s.yaml"
    f.write_text("settings: [{freq: 8, start_frg: 1}]\nbaseline: h15-proved\n")
    with pytest.raises(UsageError, match="built by the triton backend") as e:
        load_sweep(f)
    assert "--backend" not in (e.value.hint or "")


def test_a_sweep_keeps_its_files_notes():
    # `sweep emulation` records them in the session beside the results: what the sweep was for
    assert load_sweep(PAPER_FILE).notes == yaml.safe_load(PAPER_FILE.read_text())["notes"]


def test_a_patch_for_another_fa4_version_is_said_not_to_apply(monkeypatch, tmp_path):
    """The patch's anchors are written against one FA4 release: another installed version is named, not patched."""
    from softbench.kernels import patch

    monkeypatch.setattr(patch, "installed_fa4", lambda: (tmp_path, "0.0.1"))
    setting = EmulationSetting(8, 1)
    assert emu.check_patch_applies(setting) == (f"installed flash-attn-4 is 0.0.1; the patch is written for "
                                                f"{emu.emulation_patch(setting).fa4_version}")


def test_sources_without_the_anchor_are_said_not_to_apply(monkeypatch, tmp_path):
    """The right version whose sources were edited: the reason names the edit that found no anchor (the sweep
    command lists it per setting) rather than raising out of the check."""
    from softbench.kernels import patch

    setting = EmulationSetting(8, 1)
    source = tmp_path / "cute" / "flash_fwd_sm100.py"
    source.parent.mkdir()
    monkeypatch.setattr(patch, "installed_fa4", lambda: (tmp_path, emu.emulation_patch(setting).fa4_version))
    source.write_text(_fake_sm100_source())
    assert emu.check_patch_applies(setting) is None
    source.write_text(_fake_sm100_source().replace("self.ex2_emu_freq = 0\n", "self.ex2_emu_freq = 1\n"))
    assert "sm100-ex2-emu-settings" in emu.check_patch_applies(setting)


def test_a_sweep_file_with_good_names_and_fields_reads():
    f = PAPER_FILE.parent / "emulation-sweep-paper.yaml"
    sweep = load_sweep(f)
    assert sweep.baseline == "A0" and sweep.also_compare == ("A1",)
    # the kernels the sweep runs: every setting in the file's order, then what it also compares
    assert sweep.variants() == ["emu-f0-s1", "emu-f16-s1", "emu-f8-s1", "emu-f8-s0", "emu-f2-s1", "emu-f4-s1",
                                "emu-f2-s0", "emu-f4-s0", "A1"]
    assert sweep.settings[0].label == "freq 0 (hardware MUFU only)" and sweep.settings[1].paper_beta_pct == 12.5


def test_a_sweep_file_without_a_name_is_titled_by_its_file(cli, tmp_path):
    f = tmp_path / "unnamed.yaml"
    f.write_text("settings: [{freq: 8, start_frg: 1}]\n")
    r = cli("sweep", "emulation", "--dry-run", "--protocol", str(f), "--out", str(tmp_path / "out"))
    assert r.returncode == 0 and "unnamed.yaml: " in r.stdout, r.stderr
