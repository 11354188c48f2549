"""A tiny randomly initialised Llama for the end-to-end fidelity tests: a character-level tokenizer, a synthetic
text and a 2-layer model with sharpened queries, saved under one folder. The tests that use it differ only in
the text's length and the model's geometry, passed as keyword arguments."""

from pathlib import Path

import numpy as np
import torch

WORDS = ["cat", "dog", "sun", "moon", "tree", "house", "field", "sky", "night", "wood"]


def build_tiny_llama(root: Path, *, n_sentences: int, hidden_size: int, intermediate_size: int,
                     num_attention_heads: int, num_key_value_heads: int, head_dim: int,
                     max_position_embeddings: int, q_scale: float = 8.0, num_hidden_layers: int = 2):
    """Write ``root/text.txt`` (``n_sentences`` seeded sentences), a character-level tokenizer and a Llama with
    random weights (seed 0; every layer's q_proj multiplied by ``q_scale``, a sharper attention than the default
    init, so that the operators have something to change) to ``root/model``. Returns (model folder, text file)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    rng = np.random.default_rng(0)
    text = " ".join(f"the {WORDS[rng.integers(10)]} of {WORDS[rng.integers(10)]} is {n}." for n in range(n_sentences))
    (root / "text.txt").write_text(text)
    vocab = {"<s>": 0, "</s>": 1, "<unk>": 2, **{c: i + 3 for i, c in enumerate(sorted(set(text)))}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    fast.save_pretrained(root / "model")
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(vocab), hidden_size=hidden_size, intermediate_size=intermediate_size,
                      num_hidden_layers=num_hidden_layers, num_attention_heads=num_attention_heads,
                      num_key_value_heads=num_key_value_heads, head_dim=head_dim,
                      max_position_embeddings=max_position_embeddings, bos_token_id=0, eos_token_id=1)
    model = LlamaForCausalLM(cfg)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight.mul_(q_scale)
    model.save_pretrained(root / "model")
    return root / "model", root / "text.txt"
