"""Data-parallel fidelity (issue 19) on the CPU: shard assignment, the --gpus launcher's refusals and command
line, and, under torchrun with gloo on a tiny Llama on the sim path, the gather (equal to a one-process run bit
for bit), a rank that dies and a resume with another world size. --device-map on one device."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from softbench.cli import main
from softbench.core.errors import UnsupportedError, UsageError
from softbench.fidelity import gpus
from softbench.fidelity.engine import FAULT_ENV
from softbench.runtime import distributed, launch

ROOT = Path(__file__).resolve().parents[1]
# the per-block results; `seconds` (wall time) and `rank` (who computed it) legitimately differ
RESULT_KEYS = ("block", "condition", "nll", "n_tokens", "kl_forward", "kl_reverse", "jsd", "top1_agreement")


def test_ranks_come_from_torchruns_environment():
    assert distributed.from_env({}) == distributed.Ranks(0, 1, 0)
    assert distributed.from_env({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"}) == distributed.Ranks(3, 4, 1)
    with pytest.raises(UsageError, match="outside WORLD_SIZE"):
        distributed.from_env({"RANK": "4", "WORLD_SIZE": "4"})
    with pytest.raises(UsageError, match="not an integer"):
        distributed.from_env({"RANK": "x", "WORLD_SIZE": "2"})
    assert distributed.rank_device("cuda", distributed.Ranks(1, 2, 1)) == "cuda:1"
    assert distributed.rank_device("cuda", distributed.Ranks()) == "cuda"
    assert distributed.rank_device("cpu", distributed.Ranks(1, 2, 1)) == "cpu"


def test_shards_are_round_robin_disjoint_and_cover_the_blocks_to_do():
    todo = [0, 2, 3, 5, 6, 7, 9]  # a resumed session: 1, 4 and 8 are done
    for world in (1, 2, 3, 4, 8):
        shards = [distributed.shard(todo, r, world) for r in range(world)]
        assert sorted(b for s in shards for b in s) == todo
        rounds = distributed.rounds(todo, world)
        assert [b for rnd in rounds for b in rnd] == todo  # round by round, the block order
        for r in range(world):
            assert [rnd[r] for rnd in rounds if r < len(rnd)] == shards[r]
    assert distributed.shard(todo, 1, 3) == [2, 6]


def test_one_process_group_is_the_identity_and_opens_nothing():
    import torch.distributed as dist

    g = distributed.Group(distributed.Ranks(), "cpu")
    assert g.gather({"a": 1}) == [{"a": 1}] and g.all_gather(2) == [2] and g.broadcast([3]) == [3]
    g.close()
    assert g.backend is None and not dist.is_initialized()


class _TwoRanksOneReadingAnotherCorpus(distributed.Group):
    """Rank 0 of two, whose peer's corpus tokenized to another stream: its all_gather hands back both members, the
    peer's with another token signature. Only the collective stands in; the check that reads it is the engine's."""

    def __init__(self):  # no process group is opened: there is no peer to meet
        self.ranks, self.backend = distributed.Ranks(rank=0, world=2, local_rank=0), None

    def all_gather(self, obj) -> list:
        return [obj, {**obj, "rank": 1, "token_signature": "another stream"}]


def test_ranks_that_tokenized_the_corpus_differently_are_refused_before_any_block():
    """Two ranks with different token streams would score different blocks under one block id, and the gathered
    NLLs would mix them: the run stops in one sentence before a session is opened."""
    from types import SimpleNamespace

    from softbench.core.errors import MeasurementError
    from softbench.fidelity.engine import _run

    prep = SimpleNamespace(run={"token_signature": "this stream"})
    with pytest.raises(MeasurementError, match="the ranks tokenized the corpus differently"):
        _run(None, [], prep, None, None, "cpu", _TwoRanksOneReadingAnotherCorpus())


def test_gpus_starts_torchrun_without_gpus_and_with_nvls_off():
    args = ["--model", "m", "--gpus", "2", "--max-blocks", "4", "--gpus=3"]
    argv = launch.torchrun_argv(2, "fidelity", args)
    assert argv[1:] == ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m", "softbench",
                        "fidelity", "--model", "m", "--max-blocks", "4"]
    assert launch.torchrun_env({"NCCL_NVLS_ENABLE": "1", "X": "y"}) == {**launch.NO_NVLS, "X": "y"}
    assert launch.NO_NVLS == {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                              "NVSHMEM_DISABLE_NVLS": "1"}
    gpus.check_gpus(2, None, visible=2, in_launch=False)
    with pytest.raises(UnsupportedError, match="only 2 CUDA GPU"):
        gpus.check_gpus(4, None, visible=2, in_launch=False)
    with pytest.raises(UsageError, match="under torchrun"):
        gpus.check_gpus(2, None, visible=2, in_launch=True)
    with pytest.raises(UsageError, match="--device cpu"):
        gpus.check_gpus(2, "cpu", visible=2, in_launch=False)


def test_gpus_on_a_machine_without_cuda_is_refused_in_one_sentence(capsys, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    code = main(["fidelity", "--model", "m", "--gpus", "2", "--out", str(tmp_path / "s")])
    err = capsys.readouterr().err
    assert code == UnsupportedError.exit_code
    assert "error: --gpus needs CUDA GPUs and none is visible here" in err and "gloo" in err
    assert not (tmp_path / "s").exists()
    assert main(["fidelity", "--model", "m", "--gpus", "2", "--device-map", "auto"]) == 2
    assert "use one or the other" in capsys.readouterr().err


def test_the_kernel_path_and_a_device_map_are_refused_under_torchrun():
    from softbench.fidelity.engine import FidelityOptions, _refuse_distributed

    two = distributed.Ranks(1, 2, 1)
    with pytest.raises(UnsupportedError, match="rank 1 of 2"):
        _refuse_distributed(FidelityOptions(model="m", path="kernel", backend="triton"), two)
    with pytest.raises(UsageError, match="one or the other"):
        _refuse_distributed(FidelityOptions(model="m", device_map="auto"), two)
    _refuse_distributed(FidelityOptions(model="m", path="kernel"), distributed.Ranks())
    with pytest.raises(UnsupportedError, match="--device-map places"):
        FidelityOptions(model="m", path="kernel", device_map="auto").check()
    with pytest.raises(UsageError, match="must be auto"):
        FidelityOptions(model="m", device_map="balanced").check()


# --- under torchrun, gloo, on the tiny model ----------------------------------------------------------------

pytest.importorskip("transformers", reason="softbench[fidelity] is not installed")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from tiny_llama import build_tiny_llama

    root = tmp_path_factory.mktemp("tiny")
    build_tiny_llama(root, n_sentences=400, hidden_size=32, intermediate_size=64, num_attention_heads=2,
                     num_key_value_heads=1, head_dim=16, max_position_embeddings=128)
    return root


def _env(**extra):
    # one thread in every process, as torchrun gives each of several ranks: the same arithmetic everywhere
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])), **extra}


def _args(tiny, out):
    # 21 blocks: an interval (20 or more) and an odd count, so the shards differ in size
    return ["fidelity", "--model", str(tiny / "model"), "--corpus", str(tiny / "text.txt"), "--block-len", "32",
            "--max-blocks", "21", "--bootstrap", "300", "--device", "cpu", "--out", str(out)]


def _torchrun(n, args, **env):
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}",
                           "-m", "softbench", *args], capture_output=True, text=True, env=_env(**env), timeout=300)


def _only_session(out: Path) -> Path:
    (session,) = list(out.iterdir())
    return session


def _results(session: Path) -> list[tuple]:
    rows = [json.loads(line) for line in (session / "blocks.jsonl").read_text().splitlines()]
    return [tuple(r.get(k) for k in RESULT_KEYS) for r in rows]


def _statistics(session: Path) -> dict:
    s = json.loads((session / "summary.json").read_text())
    return {"baseline": s["baseline"]["nll"], "blocks": s["block_ids"],
            "conditions": [{k: c[k] for k in ("name", "dnll", "ci_low", "ci_high", "jsd", "n_lower")}
                           for c in s["conditions"]],
            "contrasts": [(c["a"], c["b"], c["dnll"], c["ci_low"], c["ci_high"]) for c in s["contrasts"]]}


@pytest.fixture(scope="module")
def one_process(tiny, tmp_path_factory):
    out = tmp_path_factory.mktemp("one")
    proc = subprocess.run([sys.executable, "-m", "softbench", *_args(tiny, out)], capture_output=True, text=True,
                          env=_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return _only_session(out)


@pytest.mark.slow
def test_two_ranks_equal_one_process_bit_for_bit(tiny, one_process, tmp_path):
    proc = _torchrun(2, _args(tiny, tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    session = _only_session(tmp_path)  # one session, written by rank 0 alone
    assert json.loads((session / "status.json").read_text())["complete"]
    # the union of the shards, in block order, each block's rows equal to the one-process run's
    assert _results(session) == _results(one_process)
    rows = [json.loads(line) for line in (session / "blocks.jsonl").read_text().splitlines()]
    assert {r["block"] % 2 for r in rows if r["rank"] == 1} == {1}  # rank 1 did the odd blocks
    assert _statistics(session) == _statistics(one_process)
    assert _statistics(session)["conditions"][0]["ci_low"] is not None  # the bootstrap interval was compared
    (launch_,) = json.loads((session / "run.json").read_text())["launches"]
    assert launch_["world_size"] == 2 and launch_["backend"] == "gloo"
    assert [(m["rank"], m["device"]) for m in launch_["ranks"]] == [(0, "cpu"), (1, "cpu")]
    assert json.loads((session / "summary.json").read_text())["world_sizes"] == [2]


@pytest.mark.slow
def test_a_dead_rank_leaves_a_partial_session_that_a_resume_with_three_ranks_completes(tiny, one_process,
                                                                                        tmp_path):
    proc = _torchrun(2, _args(tiny, tmp_path), **{FAULT_ENV: "1:1"})
    assert proc.returncode != 0
    session = _only_session(tmp_path)
    status = json.loads((session / "status.json").read_text())
    assert status["state"] == "partial" and not status["complete"]
    kept = {r[0] for r in _results(session)}
    # rank 1 finished block 1 and died on block 3; rank 0 had block 0 and was on (or done with) block 2
    assert {0, 1} <= kept <= {0, 1, 2}
    assert json.loads((session / "summary.json").read_text())["blocks_complete"] == len(kept)
    proc = _torchrun(3, ["fidelity", "--resume", str(session)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((session / "status.json").read_text())["complete"]
    by_key = {(r[0], r[1]): r for r in _results(session)}
    assert sorted(by_key.values()) == sorted(_results(one_process))  # nothing lost, nothing different
    assert _statistics(session) == _statistics(one_process)
    run = json.loads((session / "run.json").read_text())
    assert [launch_["world_size"] for launch_ in run["launches"]] == [2, 3]


def test_device_map_on_one_device_changes_nothing(tiny, tmp_path, monkeypatch):
    import torch
    from transformers import AutoModelForCausalLM

    if torch.cuda.is_available():
        pytest.skip("on a CUDA machine --device-map auto places the model on the GPUs")
    from softbench.fidelity.engine import FidelityOptions, run_fidelity

    def run(out, **kw):
        return run_fidelity(FidelityOptions(model=str(tiny / "model"), corpus=str(tiny / "text.txt"), block_len=32,
                                            max_blocks=3, bootstrap=100, device="cpu", out_dir=str(out), **kw))

    loads = []
    load = AutoModelForCausalLM.from_pretrained

    def spy(*args, **kw):
        loads.append(kw.get("device_map"))
        return load(*args, **kw)

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", spy)
    mapped, plain = run(tmp_path / "map", device_map="auto"), run(tmp_path / "plain")
    assert loads == ["auto", None]  # the option reached the loader, and only when given
    assert mapped.read_json("run.json")["device_map"] == {"": "cpu"}
    assert "device_map" not in plain.read_json("run.json")
    assert _results(mapped.path) == _results(plain.path)


def test_a_sigterm_while_the_partial_session_is_written_waits_for_the_write():
    import signal

    from softbench.runtime.session_runner import Terminated, sigterm_as_interrupt, sigterm_deferred

    with sigterm_as_interrupt():
        with sigterm_deferred():
            os.kill(os.getpid(), signal.SIGTERM)  # torchrun's, just after a peer died
            written = True
        assert written
        with pytest.raises(Terminated):  # the interrupting handler is back
            os.kill(os.getpid(), signal.SIGTERM)
