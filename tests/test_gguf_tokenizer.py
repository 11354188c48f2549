"""softbench.fidelity.gguf_tokenizer: a tokenizer that transformers rebuilt from a GGUF must tokenize as the file
says. Real inputs: GGUF files written by the gguf library, byte-level BPE tokenizers trained by tokenizers on the
Austen text, the one with its merges dropped standing for the broken conversion seen on the GPU host."""
from __future__ import annotations

import gguf
import numpy as np
import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from softbench.core.errors import UnsupportedError
from softbench.fidelity.gguf_tokenizer import (WHOLE_WORD_MIN, check_gguf_tokenizer, header_fields, read_facts,
                                               whole_word_share)

TEXT = ("It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in "
        "want of a wife. However little known the feelings or views of such a man may be on his first entering a "
        "neighbourhood, this truth is so well fixed in the minds of the surrounding families, that he is "
        "considered the rightful property of some one or other of their daughters. ") * 40


def write_gguf(path, model: str, add_bos: bool | None, n_tokens: int = 3000, bos_id: int = 7):
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_string("general.name", "tiny")
    w.add_tokenizer_model(model)
    # a vocabulary array of strings and a float array before the fields read: the walk must skip both
    w.add_token_list([f"tok{i}" for i in range(n_tokens)])
    w.add_token_scores([float(-i) for i in range(n_tokens)])
    if add_bos is not None:
        w.add_add_bos_token(add_bos)
    w.add_bos_token_id(bos_id)
    w.add_tensor("w", np.zeros((4, 4), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def bpe(merges: bool, bos: str | None = None) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([TEXT], trainers.BpeTrainer(vocab_size=1000, show_progress=False,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    if not merges:  # the same vocabulary without its merges: every word falls apart into pieces
        vocab = tok.get_vocab()
        tok.model = models.BPE(vocab=vocab, merges=[])
    if bos is not None:  # a special token added after the trained vocabulary: its id is the vocabulary's size
        tok.add_special_tokens([bos])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=bos)


def test_header_fields_skip_arrays_and_read_the_scalars(tmp_path):
    p = write_gguf(tmp_path / "t.gguf", "llama", True)
    assert header_fields(p) == {"tokenizer.ggml.model": "llama", "tokenizer.ggml.add_bos_token": True,
                                "tokenizer.ggml.bos_token_id": 7}
    facts = read_facts(write_gguf(tmp_path / "u.gguf", "gpt2", None))
    assert (facts.model, facts.add_bos, facts.bos_id) == ("gpt2", None, 7)


def test_header_fields_agree_with_the_gguf_library(tmp_path):
    p = write_gguf(tmp_path / "t.gguf", "gpt2", False)
    r = gguf.GGUFReader(str(p))
    f = r.fields["tokenizer.ggml.bos_token_id"]
    assert header_fields(p)["tokenizer.ggml.bos_token_id"] == int(f.parts[f.data[0]][0])


def test_a_non_gguf_file_is_refused(tmp_path):
    p = tmp_path / "x.gguf"
    p.write_bytes(b"PK\x03\x04" + bytes(64))
    with pytest.raises(UnsupportedError, match="not a GGUF file"):
        header_fields(p)


def test_a_trained_tokenizer_keeps_vocabulary_words_whole_and_a_mergeless_one_does_not():
    kept, tried = whole_word_share(bpe(merges=True), TEXT, "\u0120")
    assert tried >= 20 and kept >= WHOLE_WORD_MIN * tried
    kept, tried = whole_word_share(bpe(merges=False), TEXT, "\u0120")
    assert tried >= 20 and kept < WHOLE_WORD_MIN * tried


def test_check_refuses_the_broken_conversion_and_passes_the_right_one(tmp_path):
    p = write_gguf(tmp_path / "t.gguf", "gpt2", False)
    with pytest.raises(UnsupportedError, match=r"only \d+ of \d+ corpus words"):
        check_gguf_tokenizer(bpe(merges=False), p, TEXT, adds_bos=False)
    record = check_gguf_tokenizer(bpe(merges=True), p, TEXT, adds_bos=False)
    assert record["gguf_add_bos_token"] is False and record["whole_words_kept"] == record["whole_words_tried"]


def test_check_refuses_a_tokenizer_that_lost_the_files_bos(tmp_path):
    p = write_gguf(tmp_path / "t.gguf", "gpt2", True)
    with pytest.raises(UnsupportedError, match="without a BOS, but the file says add_bos_token = true") as e:
        check_gguf_tokenizer(bpe(merges=True), p, TEXT, adds_bos=False)
    assert "transformers" in str(e.value)


def test_check_refuses_a_tokenizer_whose_bos_is_another_token_than_the_files(tmp_path):
    tok = bpe(merges=True, bos="<s>")
    own = tok.bos_token_id
    assert own is not None
    with pytest.raises(UnsupportedError, match=rf"BOS token id {own}, but the file says bos_token_id = {own + 1}"):
        check_gguf_tokenizer(tok, write_gguf(tmp_path / "t.gguf", "gpt2", False, bos_id=own + 1), TEXT, adds_bos=False)
    record = check_gguf_tokenizer(tok, write_gguf(tmp_path / "u.gguf", "gpt2", False, bos_id=own), TEXT,
                                  adds_bos=False)
    assert record["gguf_bos_token_id"] == record["tokenizer_bos_token_id"] == own
