"""Tiny models of the paper's families, built offline from their configs with random weights (seed 0), with a
character-level tokenizer, saved with save_pretrained: 2 layers, hidden size 64. Each keeps what makes its family
different for attention: Llama-3's rope scaling, Qwen2.5's QKV bias, Mistral, Gemma-2's attention-logit and
final-logit softcaps with alternating sliding windows, Gemma-3's head dim 256 with sliding and full layers."""

from pathlib import Path

import torch

WINDOW = 16  # short, so that a 48- or 64-token block crosses it


def _family(name: str):
    import transformers as t

    common = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=256)
    return {
        "qwen2.5": (t.Qwen2Config, t.Qwen2ForCausalLM, dict(common)),
        "llama-3": (t.LlamaConfig, t.LlamaForCausalLM,
                    dict(common, rope_theta=500000.0, rope_scaling={
                        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                        "original_max_position_embeddings": 32})),
        "mistral": (t.MistralConfig, t.MistralForCausalLM, dict(common, head_dim=16, sliding_window=None)),
        "gemma-2": (t.Gemma2Config, t.Gemma2ForCausalLM,
                    dict(common, head_dim=16, query_pre_attn_scalar=16, attn_logit_softcapping=5.0,
                         final_logit_softcapping=3.0, sliding_window=WINDOW,
                         layer_types=["sliding_attention", "full_attention"])),
        "gemma-3": (t.Gemma3TextConfig, t.Gemma3ForCausalLM,
                    dict(common, head_dim=256, query_pre_attn_scalar=256, sliding_window=WINDOW,
                         layer_types=["sliding_attention", "full_attention"])),
    }[name]


FAMILIES = ("qwen2.5", "llama-3", "mistral", "gemma-2", "gemma-3")


def char_tokenizer(text: str, add_bos: bool):
    """A fast tokenizer with one id per character; `add_bos`: it puts <s> before every text, as Gemma's and
    Llama-3's tokenizers do."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {"<s>": 0, "</s>": 1, "<unk>": 2, **{c: i + 3 for i, c in enumerate(sorted(set(text)))}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    if add_bos:
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")


def build(family: str, root: Path, text: str, add_bos: bool = False, q_scale: float = 4.0) -> Path:
    """Save the tokenizer and a random-weight model of `family` under root/family; returns that folder."""
    config_cls, model_cls, kw = _family(family)
    tok = char_tokenizer(text, add_bos)
    folder = Path(root) / family
    tok.save_pretrained(folder)
    torch.manual_seed(0)
    cfg = config_cls(vocab_size=len(tok), bos_token_id=0, eos_token_id=1, pad_token_id=2, **kw)
    model = model_cls(cfg)
    with torch.no_grad():  # a sharper attention than the default init, so that the maps have work to do
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight.mul_(q_scale)
    model.save_pretrained(folder)
    return folder
