"""Is a tokenizer that transformers rebuilt from a GGUF file the tokenizer the GGUF describes?

transformers does not read a GGUF's tokenizer as llama.cpp does: it converts the vocabulary and scores into a
tokenizers model. Some versions get this wrong without a word. On the H200 host (transformers 5.17.0) Gemma-3-270M's
GGUF came back without its BOS (the file says `tokenizer.ggml.add_bos_token = true`) and with merges so broken
that " world" became "▁w", "or", "ld" although "▁world" is one token of the vocabulary; the NLL of every block was
then about 5 nats instead of about 3, and the fidelity numbers describe text the model never saw (sessions
20261201T145809Z-20261201T150438Z). transformers 5.24.0 converts the same file correctly.

So before any weights load, for a local GGUF: (1) the BOS the file asks for must be the one the tokenizer adds,
and (2) words of the corpus that are whole tokens of the vocabulary must come out as that one token. A correct
BPE or SentencePiece tokenizer does so for nearly all of them (SmolLM2-135M and Gemma-3-270M with transformers
5.24.0: all of the first 400 such words of Austen); the broken conversion above kept 11 of 400 (2.8%). The bar,
WHOLE_WORD_MIN, sits far from both."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from softbench.core.errors import UnsupportedError

# the share of vocabulary words that must tokenize as their own single token (see the module's docstring)
WHOLE_WORD_MIN = 0.8
SAMPLE_WORDS = 400
# how a word's leading space is written inside the vocabulary: SentencePiece and byte-level BPE (GPT-2)
SPACE_MARKS = {"llama": "\u2581", "gpt2": "\u0120"}
_WORD = re.compile(r"[A-Za-z]{3,}")
# what to do about either refusal: the conversion is transformers', so another release or another format
CONVERSION_HINT = ("use a transformers release that converts it correctly (5.24.0 does for Gemma-3), or the model's "
                   "Hugging Face folder instead of the GGUF")


@dataclass(frozen=True)
class GGUFTokenizerFacts:
    model: str | None  # tokenizer.ggml.model: "llama" (SentencePiece), "gpt2" (byte-level BPE), ...
    add_bos: bool | None  # tokenizer.ggml.add_bos_token, None where the file does not say
    bos_id: int | None


# GGUF value types (the format's numbering) and the byte size of the fixed-size ones
_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_FORMATS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
WANTED = ("tokenizer.ggml.model", "tokenizer.ggml.add_bos_token", "tokenizer.ggml.bos_token_id")


def header_fields(path: Path, wanted: tuple[str, ...] = WANTED) -> dict:
    """The scalar key-value fields `wanted` of a GGUF file's header. gguf.GGUFReader would build every field and
    tensor first (43 s for Gemma-3's vocabulary of 262,144 tokens on the 2-core machine); this walks the header
    once and skips the arrays."""
    import mmap
    import struct

    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        if m[:4] != b"GGUF":
            raise UnsupportedError(f"{path} is not a GGUF file")
        _version, _tensors, n_kv = struct.unpack_from("<IQQ", m, 4)
        pos, out = 24, {}

        def string(at: int) -> tuple[str, int]:
            (n,) = struct.unpack_from("<Q", m, at)
            return m[at + 8:at + 8 + n].decode("utf-8", "replace"), at + 8 + n

        for _ in range(n_kv):
            key, pos = string(pos)
            (vtype,) = struct.unpack_from("<I", m, pos)
            pos += 4
            if vtype == _STRING:
                value, pos = string(pos)
            elif vtype == _ARRAY:
                itype, count = struct.unpack_from("<IQ", m, pos)
                pos += 12
                if itype == _STRING:
                    for _ in range(count):
                        (n,) = struct.unpack_from("<Q", m, pos)
                        pos += 8 + n
                elif itype in _SIZES:
                    pos += _SIZES[itype] * count
                else:  # nested arrays: no tokenizer field is one; stop rather than misread
                    break
                value = None
            elif vtype in _FORMATS:
                (value,) = struct.unpack_from(_FORMATS[vtype], m, pos)
                pos += _SIZES[vtype]
            else:
                break
            if key in wanted:
                out[key] = value
                if len(out) == len(wanted):
                    break
    return out


def read_facts(path: Path) -> GGUFTokenizerFacts:
    h = header_fields(path)
    add, bos = h.get("tokenizer.ggml.add_bos_token"), h.get("tokenizer.ggml.bos_token_id")
    return GGUFTokenizerFacts(h.get("tokenizer.ggml.model"), None if add is None else bool(add),
                              None if bos is None else int(bos))


def whole_word_share(tokenizer, text: str, mark: str, limit: int = SAMPLE_WORDS) -> tuple[int, int]:
    """(kept, tried): of the first `limit` distinct words of `text` whose space-marked form is one token of the
    tokenizer's vocabulary, how many it encodes (after a space) as exactly that token."""
    vocab = tokenizer.get_vocab()
    kept = tried = 0
    seen: set[str] = set()
    for m in _WORD.finditer(text[:2_000_000]):
        w = m.group(0)
        if w in seen:
            continue
        seen.add(w)
        piece = vocab.get(mark + w)
        if piece is None:
            continue
        ids = tokenizer(" " + w, add_special_tokens=False, return_attention_mask=False)["input_ids"]
        tried += 1
        kept += ids == [piece]
        if tried >= limit:
            break
    return kept, tried


def check_gguf_tokenizer(tokenizer, gguf_path: Path, text: str, adds_bos: bool) -> dict:
    """Refuse a tokenizer that does not tokenize as its GGUF file says; returns what was checked (run.json)."""
    import transformers

    facts = read_facts(gguf_path)
    version = transformers.__version__
    if facts.add_bos is not None and facts.add_bos != adds_bos:
        raise UnsupportedError(
            f"transformers {version} rebuilt {gguf_path.name}'s tokenizer {'without' if facts.add_bos else 'with'} "
            f"a BOS, but the file says add_bos_token = {str(facts.add_bos).lower()}: its conversion of this GGUF's "
            "tokenizer is wrong, so every NLL would be of text the model was not trained on",
            hint=CONVERSION_HINT)
    # the BOS is the one token put before every block (--bos block): the rebuilt tokenizer's must be the file's
    own_bos = getattr(tokenizer, "bos_token_id", None)
    if facts.bos_id is not None and own_bos is not None and own_bos != facts.bos_id:
        raise UnsupportedError(
            f"transformers {version} rebuilt {gguf_path.name}'s tokenizer with BOS token id {own_bos}, but the file "
            f"says bos_token_id = {facts.bos_id}: every block would start with a token the model was not trained "
            "to see there", hint=CONVERSION_HINT)
    mark = SPACE_MARKS.get(facts.model or "")
    kept = tried = None
    if mark is not None:
        kept, tried = whole_word_share(tokenizer, text, mark)
        if tried >= 20 and kept < WHOLE_WORD_MIN * tried:
            raise UnsupportedError(
                f"transformers {version} rebuilt {gguf_path.name}'s tokenizer wrongly: only {kept} of {tried} corpus "
                f"words that are single tokens of its vocabulary come out as that token (a correct one keeps nearly "
                f"all), so every NLL would be of text the model was not trained on",
                hint=CONVERSION_HINT)
    return {"transformers": version, "gguf_tokenizer_model": facts.model, "gguf_add_bos_token": facts.add_bos,
            "tokenizer_adds_bos": adds_bos, "gguf_bos_token_id": facts.bos_id, "tokenizer_bos_token_id": own_bos, "whole_words_kept": kept, "whole_words_tried": tried,
            "whole_word_min": WHOLE_WORD_MIN}
