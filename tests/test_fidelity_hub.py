"""Hugging Face's conventions for real, against a loopback Hub (tests/hub_server.py) that serves a tiny Mistral
under the id the alias mistral-7b names: the CLI downloads it into an empty cache and runs; with HF_HUB_OFFLINE=1
the same cache runs with no request at all; --offline with an empty cache makes no request and says so, naming
HF_HUB_OFFLINE; a name the Hub does not have is said to be missing there. The design card's command as written
(`softbench fidelity --model mistral-7b`, whose default corpus, wikitext-103, comes through `datasets`) fetches
the model and the data set's test split the same way. Nothing in transformers, datasets or huggingface_hub is
replaced: each run is `python -m softbench` in its own process, which is also how the
libraries first read HF_ENDPOINT and HF_HUB_OFFLINE."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hub_server import COMMIT, LoopbackHub
from tiny_families import build

pytestmark = pytest.mark.slow  # four CLI processes, each importing torch and transformers
pytest.importorskip("transformers", reason="softbench[fidelity] is not installed")
TEXT = "the cat of the dog is under the old tree by the house. " * 40
REPO = "mistralai/Mistral-7B-v0.3"  # what --model mistral-7b resolves to


def _cli(args, env_extra, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    env.update({"HF_HUB_DISABLE_TELEMETRY": "1", "PYTHONPATH": os.pathsep.join(
        filter(None, [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH")]))}, **env_extra)
    return subprocess.run([sys.executable, "-m", "softbench", "fidelity", *args], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=240)


def test_alias_downloads_from_the_hub_then_runs_offline_from_the_cache(tmp_path):
    model = build("mistral", tmp_path / "served", TEXT)
    corpus = tmp_path / "text.txt"
    corpus.write_text(TEXT)
    run = ["--model", "mistral-7b", "--corpus", str(corpus), "--block-len", "64", "--max-blocks", "2",
           "--bootstrap", "100", "--device", "cpu"]
    with LoopbackHub(models={REPO: model}) as hub:
        cache = {"HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "hf")}
        first = _cli([*run, "--out", str(tmp_path / "s1")], cache, tmp_path)
        assert first.returncode == 0, first.stderr[-3000:]
        fetched = {p.rsplit("/", 1)[-1] for m, p in hub.requests if m == "GET" and f"/{REPO}/resolve/" in p}
        assert {"config.json", "model.safetensors", "tokenizer.json"} <= fetched
        (session,) = (tmp_path / "s1").iterdir()
        run_json = json.loads((session / "run.json").read_text())
        assert run_json["model"]["location"] == REPO and run_json["model"]["model_type"] == "mistral"
        assert run_json["gate"]["passed"]

        asked = len(hub.requests)
        second = _cli([*run, "--out", str(tmp_path / "s2")], {**cache, "HF_HUB_OFFLINE": "1"}, tmp_path)
        assert second.returncode == 0, second.stderr[-3000:]
        assert len(hub.requests) == asked  # the cache alone
        (again,) = (tmp_path / "s2").iterdir()
        assert json.loads((again / "run.json").read_text())["token_signature"] == run_json["token_signature"]

        empty = {"HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "empty")}
        offline = _cli([*run, "--offline", "--out", str(tmp_path / "s3")], empty, tmp_path)
        assert offline.returncode == 3 and len(hub.requests) == asked  # this machine may not download: exit 3
        assert "HF_HUB_OFFLINE" in offline.stderr and "no request was made" in offline.stderr
        assert "Traceback" not in offline.stderr and not (tmp_path / "s3").exists()

        missing = _cli(["--model", "softbench-test/no-such-model", "--corpus", str(corpus), "--device", "cpu",
                        "--out", str(tmp_path / "s4")], empty, tmp_path)
        assert missing.returncode == 2 and len(hub.requests) > asked  # this one did ask
        assert f"{hub.url} has no such repository or file" in missing.stderr and "Traceback" not in missing.stderr


WIKITEXT_REPO, WIKITEXT_CONFIG = "Salesforce/wikitext", "wikitext-103-raw-v1"  # softbench.fidelity.corpus.WIKITEXT


def _wikitext(root: Path, lines: list[str]) -> Path:
    """The data set's layout on the Hub: one folder of parquet shards per configuration, and the README's YAML
    that names each split's files (datasets reads the configurations from it)."""
    pq = pytest.importorskip("pyarrow.parquet", reason="datasets (softbench[fidelity]) brings pyarrow")
    import pyarrow as pa

    shards = root / WIKITEXT_CONFIG
    shards.mkdir(parents=True)
    pq.write_table(pa.table({"text": lines}), shards / "test-00000-of-00001.parquet")
    pq.write_table(pa.table({"text": ["not the test split\n"]}), shards / "train-00000-of-00001.parquet")
    (root / "README.md").write_text(f"""---
configs:
- config_name: {WIKITEXT_CONFIG}
  data_files:
  - split: test
    path: {WIKITEXT_CONFIG}/test-*
  - split: train
    path: {WIKITEXT_CONFIG}/train-*
---
""")
    return root


def test_the_design_cards_command_fetches_model_and_wikitext_then_runs_offline(tmp_path):
    pytest.importorskip("datasets", reason="softbench[fidelity] brings datasets")
    lines = [" = The cat = \n", *(line.strip() + " .\n" for line in TEXT.split(".") if line.strip())]
    model = build("mistral", tmp_path / "served", TEXT)
    data = _wikitext(tmp_path / "wikitext", lines)
    small = ["--block-len", "64", "--max-blocks", "2", "--bootstrap", "100", "--device", "cpu"]
    with LoopbackHub(models={REPO: model}, datasets={WIKITEXT_REPO: data}) as hub:
        cache = {"HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "hf")}
        first = _cli(["--model", "mistral-7b", *small, "--out", str(tmp_path / "s1")], cache, tmp_path)
        assert first.returncode == 0, first.stderr[-3000:]
        got = {p for m, p in hub.requests if m == "GET"}
        assert f"/datasets/{WIKITEXT_REPO}/resolve/{COMMIT}/{WIKITEXT_CONFIG}/test-00000-of-00001.parquet" in got
        (session,) = (tmp_path / "s1").iterdir()
        run_json = json.loads((session / "run.json").read_text())
        assert run_json["corpus"]["name"] == "wikitext-103"
        assert run_json["corpus"]["source"] == f"{WIKITEXT_REPO}/{WIKITEXT_CONFIG}/test"
        assert run_json["gate"]["passed"]

        asked = len(hub.requests)
        second = _cli(["--model", "mistral-7b", *small, "--out", str(tmp_path / "s2")],
                      {**cache, "HF_HUB_OFFLINE": "1"}, tmp_path)
        assert second.returncode == 0, second.stderr[-3000:]
        assert len(hub.requests) == asked  # model and data set from the cache alone
        (again,) = (tmp_path / "s2").iterdir()
        assert json.loads((again / "run.json").read_text())["token_signature"] == run_json["token_signature"]
