"""Corpora, aligned blocks, the token signature, and the R lazy-load reader (against R serializations written
here by hand, and Debian's janeaustenr data where it is installed)."""

import bz2
import gzip
import hashlib
import lzma
import struct
import sys
import zlib

import numpy as np
import pytest

from softbench.core.errors import UnsupportedError, UsageError
from softbench.fidelity import corpus
from softbench.fidelity.rlazyload import decode_entry, read_lazyload

# --- a minimal writer of R's XDR serialization (version 2), independent of the reader under test ---------------
_STRSXP, _CHARSXP, _INTSXP, _LGLSXP, _VECSXP, _LISTSXP, _SYMSXP, _NILVALUE = 16, 9, 13, 10, 19, 2, 1, 254
_UTF8 = 1 << 3  # CHARSXP encoding bit, stored in the "levels" field (bits 12+)


def _i(v: int) -> bytes:
    return struct.pack(">i", v)


def _charsxp(s: str) -> bytes:
    b = s.encode("utf-8")
    return _i(_CHARSXP | (_UTF8 << 12)) + _i(len(b)) + b


def _r(obj) -> bytes:
    if isinstance(obj, list) and all(isinstance(x, str) for x in obj):
        return _i(_STRSXP) + _i(len(obj)) + b"".join(_charsxp(x) for x in obj)
    if isinstance(obj, list) and all(isinstance(x, bool) for x in obj):
        return _i(_LGLSXP) + _i(len(obj)) + b"".join(_i(int(x)) for x in obj)
    if isinstance(obj, list) and all(isinstance(x, int) for x in obj):
        return _i(_INTSXP) + _i(len(obj)) + b"".join(_i(x) for x in obj)
    if isinstance(obj, dict):  # a named list: VECSXP with a names attribute
        names = _r(list(obj))
        attrs = _i(_LISTSXP | (1 << 10)) + _i(_SYMSXP) + _charsxp("names") + names + _i(_NILVALUE)
        return _i(_VECSXP | (1 << 9)) + _i(len(obj)) + b"".join(_r(v) for v in obj.values()) + attrs
    raise TypeError(type(obj))


def _serialize(obj) -> bytes:
    return b"X\n" + _i(2) + _i(0x040300) + _i(0x020300) + _r(obj)


def _write_db(tmp_path, objects: dict, frame) -> object:
    blobs, variables, offset = [], {}, 0
    for name, obj in objects.items():
        blob = frame(_serialize(obj))
        variables[name] = [offset, len(blob)]
        blobs.append(blob)
        offset += len(blob)
    (tmp_path / "Rdata.rdb").write_bytes(b"".join(blobs))
    index = {"variables": variables, "references": {}, "compressed": [True]}
    (tmp_path / "Rdata.rdx").write_bytes(gzip.compress(_serialize(index)))
    return tmp_path / "Rdata.rdx"


def _zlib_frame(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + zlib.compress(payload)


def test_lazyload_reads_hand_serialized_character_vectors(tmp_path):
    pytest.importorskip("rdata", reason="the R reader needs PyPI rdata (softbench[fidelity])")
    books = {"first": ["CHAPTER 1", "", "It is a truth universally acknowledged"], "second": ["Ça va", "ok"]}
    rdx = _write_db(tmp_path, books, _zlib_frame)
    got = read_lazyload(rdx)
    assert list(got) == ["first", "second"]
    assert [str(x) for x in got["first"]] == books["first"]
    assert [str(x) for x in got["second"]] == books["second"]
    assert [str(x) for x in read_lazyload(rdx, ["second"])["second"]] == books["second"]
    with pytest.raises(UsageError, match="no variable"):
        read_lazyload(rdx, ["third"])


def test_decode_entry_methods_and_length_check():
    payload = b"some serialized bytes" * 10
    n = struct.pack(">I", len(payload))
    assert decode_entry(n + zlib.compress(payload), True) == payload
    assert decode_entry(n + b"Z" + lzma.compress(payload, format=lzma.FORMAT_XZ), 3) == payload
    assert decode_entry(n + b"2" + bz2.compress(payload), 2) == payload
    assert decode_entry(n + b"0" + payload, 2) == payload
    with pytest.raises(UsageError, match="header says"):
        decode_entry(struct.pack(">I", 5) + zlib.compress(payload), 1)
    with pytest.raises(UsageError, match="unknown compression byte"):
        decode_entry(n + b"Q" + payload, 3)


def test_austen_from_debian_package_when_installed():
    pytest.importorskip("rdata", reason="the R reader needs PyPI rdata (softbench[fidelity])")
    try:
        rdx = corpus.find_austen()
    except UsageError:
        pytest.skip("r-cran-janeaustenr is not installed")
    text = corpus.austen_text(rdx)
    assert text.text.startswith("SENSE AND SENSIBILITY")
    starts = [text.text.index(t) for t in ("PRIDE AND PREJUDICE\n", "MANSFIELD PARK\n", "EMMA\n",
                                           "NORTHANGER ABBEY\n", "Persuasion\n\n\nby")]
    assert starts == sorted(starts)  # publication order, as austen_books() lists them
    assert len(text.text) > 3_000_000


def test_local_text_file_and_errors(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("hello world\n", encoding="utf-8")
    c = corpus.load_corpus(str(p))
    assert c.text == "hello world\n" and len(c.sha256) == 64
    with pytest.raises(UsageError, match="not wikitext-103, austen"):
        corpus.load_corpus(str(tmp_path / "missing.txt"))
    (tmp_path / "empty.txt").write_text("  \n")
    with pytest.raises(UsageError, match="empty"):
        corpus.load_corpus(str(tmp_path / "empty.txt"))
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
    with pytest.raises(UsageError, match="not UTF-8 text"):
        corpus.load_corpus(str(tmp_path / "latin1.txt"))
    (tmp_path / "model.bin").write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(range(256)))
    with pytest.raises(UsageError, match="looks binary"):
        corpus.load_corpus(str(tmp_path / "model.bin"))
    (tmp_path / "ctl.txt").write_text("ab\x01\x02cd\x1b" * 50)
    with pytest.raises(UsageError, match="looks binary"):
        corpus.load_corpus(str(tmp_path / "ctl.txt"))
    with pytest.raises(UsageError, match="not one written by datasets"):
        corpus.load_corpus(str(tmp_path))


def test_options_json_keeps_local_corpus_paths_absolute_and_names_as_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("austen", "wikitext-103", "text.txt"):
        (tmp_path / name).write_text("a file that happens to share a corpus's name")
    assert corpus.portable_spec("austen") == "austen"  # read_corpus takes the named corpus, not the file
    assert corpus.portable_spec("wikitext-103") == "wikitext-103"
    assert corpus.portable_spec("hf:owner/name:cfg:test") == "hf:owner/name:cfg:test"
    assert corpus.portable_spec("text.txt") == str(tmp_path / "text.txt")
    assert corpus.portable_spec("missing.txt") == "missing.txt"  # read_corpus says what is wrong with it


def test_the_binary_and_tagged_checks_draw_their_lines_at_one_percent_and_one_half():
    prose = "plain words of ordinary prose\n" * 100  # 3000 characters
    corpus.check_text(prose + "\x01" * 30 + "\f\v" * 50, "text")  # 30 in 3130: under 1% (\f and \v are text)
    with pytest.raises(UsageError, match="looks binary"):
        corpus.check_text(prose + "\x01" * 40, "text")  # 40 in 3040: over 1%
    corpus.check_text("a/at b/nn plain words here " * 20, "text")  # 2 of 5 words word/TAG: not tagged
    with pytest.raises(UsageError, match="part-of-speech tagged"):
        corpus.check_text("a/at b/nn c/vbd plain words " * 20, "text")  # 3 of 5
    with pytest.raises(UsageError, match="NUL bytes"):  # one NUL is binary, however few control characters
        corpus.check_text(prose + "\x00", "text")


def test_a_hub_corpus_is_owner_slash_name_before_the_hub_is_asked(monkeypatch):
    monkeypatch.setattr(corpus, "hub_dataset_text", lambda *a, **k: pytest.fail("the Hub was asked"))
    for spec in ("hf:name", "hf:owner/name/extra", "hf:a/b/c:cfg"):
        with pytest.raises(UsageError, match="OWNER/NAME"):
            corpus.read_corpus(spec)


def test_pos_tagged_brown_text_is_refused_and_prose_with_slashes_is_not(tmp_path):
    brown = ("The/at Fulton/np-tl County/nn-tl Grand/jj-tl Jury/nn-tl said/vbd Friday/nr an/at investigation/nn "
             "of/in Atlanta's/np$ recent/jj primary/nn election/nn produced/vbd ``/`` no/at evidence/nn ''/'' ./.\n")
    (tmp_path / "ca01").write_text(brown * 20)
    with pytest.raises(UsageError, match="part-of-speech tagged"):
        corpus.load_corpus(str(tmp_path / "ca01"))
    prose = "He and/or she read 3/4 of the book on 12/05, http://example.org/a, and w/o pause.\n"
    (tmp_path / "prose.txt").write_text(prose * 20)
    assert corpus.load_corpus(str(tmp_path / "prose.txt")).text == prose * 20


def test_json_lines_corpus(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text('{"text": "first line", "id": 1}\n\n"a plain string"\n{"text": "third"}\n')
    assert corpus.load_corpus(str(p)).text == "first line\na plain string\nthird"
    (tmp_path / "bad.jsonl").write_text('{"text": "ok"}\n{"title": "no text field"}\n')
    with pytest.raises(UsageError, match="line 2 is neither"):
        corpus.load_corpus(str(tmp_path / "bad.jsonl"))
    (tmp_path / "numbers.jsonl").write_text('{"text": "ok"}\n{"text": 7}\n')  # a text field that is no string
    with pytest.raises(UsageError, match="line 2 is neither"):
        corpus.load_corpus(str(tmp_path / "numbers.jsonl"))
    (tmp_path / "broken.jsonl").write_text('{"text": "ok"\n')
    with pytest.raises(UsageError, match="line 1 is not JSON"):
        corpus.load_corpus(str(tmp_path / "broken.jsonl"))
    (tmp_path / "deep.jsonl").write_text('"first"\n' + "[" * 100000 + "]" * 100000 + "\n")  # once RecursionError
    with pytest.raises(UsageError, match="line 2 nests too deeply"):
        corpus.load_corpus(str(tmp_path / "deep.jsonl"))


def test_a_folder_saved_by_datasets(tmp_path):
    datasets = pytest.importorskip("datasets", reason="datasets is not installed")
    rows = {"text": [" = Valkyria = \n", " The game began development in 2010 .\n"]}
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": ["x\n"]}),
                          "test": datasets.Dataset.from_dict(rows)}).save_to_disk(str(tmp_path / "dd"))
    assert corpus.load_corpus(str(tmp_path / "dd")).text == "".join(rows["text"])
    datasets.Dataset.from_dict({"body": ["no text column"]}).save_to_disk(str(tmp_path / "d"))
    with pytest.raises(UsageError, match="no 'text' column"):
        corpus.load_corpus(str(tmp_path / "d"))


class _Tok:
    """The one tokenizer behaviour adds_bos asks about: whether encoding puts the BOS first."""

    def __init__(self, bos_id, adds):
        self.bos_token_id = bos_id
        self.adds = adds

    def __call__(self, text, return_attention_mask=False):
        return {"input_ids": ([self.bos_token_id] if self.adds else []) + [5]}


class _EosTok(_Tok):
    """A tokenizer that appends an EOS sharing the BOS's id (GPT-2's <|endoftext|> is both)."""

    def __call__(self, text, return_attention_mask=False):
        return {"input_ids": [5, self.bos_token_id]}


def test_adds_bos_reads_what_encoding_puts_first():
    assert corpus.adds_bos(_Tok(2, True)) is True
    assert corpus.adds_bos(_Tok(2, False)) is False
    assert corpus.adds_bos(_Tok(None, False)) is False
    assert corpus.adds_bos(_EosTok(2, False)) is False  # the id at the end is no BOS first


def test_bos_regime_follows_the_tokenizer_and_stream_warns():
    assert corpus.resolve_bos("auto", True)[0] == "block"
    mode, note, warning = corpus.resolve_bos("auto", False)
    assert (mode, warning) == ("stream", None) and "adds no BOS" in note
    mode, note, warning = corpus.resolve_bos("stream", True)
    assert mode == "stream" and "only block 0" in warning and "--bos block" in warning
    assert corpus.resolve_bos("stream", False)[2] is None
    assert corpus.resolve_bos("block", False)[:2] == ("block", "block, as asked")


def test_wikitext_without_datasets_says_what_to_do(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # import fails, as on a machine without it
    with pytest.raises(UnsupportedError) as e:
        corpus.load_corpus("wikitext-103")
    assert "--corpus austen" in e.value.hint


def test_blocks_are_aligned_and_drop_the_remainder():
    stream = np.arange(10_050)
    b = corpus.make_blocks(stream, 1000)
    assert b.shape == (10, 1000)
    assert b[3, 0] == 3000 and b[9, -1] == 9999
    assert corpus.make_blocks(stream, 1000, max_blocks=4).shape == (4, 1000)
    with pytest.raises(UsageError, match="fewer than one block"):
        corpus.make_blocks(np.arange(10), 11)
    assert corpus.make_blocks(np.arange(10), 2).shape == (5, 2)  # the shortest block: one prediction
    with pytest.raises(UsageError, match="at least 2"):  # a block of one token predicts nothing
        corpus.make_blocks(np.arange(10), 1)


def test_bos_per_block_takes_l_minus_1_stream_tokens():
    stream = np.concatenate([[7], np.arange(100, 131)])  # the stream starts with its own BOS (7)
    b = corpus.make_blocks(stream, 5, bos="block", bos_id=7)
    assert b.shape == (7, 5)  # 31 text tokens in strides of 4
    assert (b[:, 0] == 7).all()
    assert b[0, 1:].tolist() == [100, 101, 102, 103] and b[1, 1:].tolist() == [104, 105, 106, 107]
    with pytest.raises(UsageError, match="no BOS"):
        corpus.make_blocks(stream, 5, bos="block", bos_id=None)


def test_token_signature():
    a = np.arange(4096).reshape(2, 2048)
    assert corpus.token_signature(a) == corpus.token_signature(a.astype(np.int32))
    b = a.copy()
    b[1, 7] += 1
    assert corpus.token_signature(a) != corpus.token_signature(b)
    assert corpus.token_signature(a) != corpus.token_signature(a[:1])
    # the signature is of int32 little-endian ids, as the docstring says, so resumed runs on any machine match
    assert corpus.token_signature(a) == hashlib.sha256(a.astype("<i4").tobytes()).hexdigest()
