"""Evaluation text, its token stream and the aligned blocks.

Corpora:
- wikitext-103: the raw test split through `datasets` (Salesforce/wikitext, wikitext-103-raw-v1), its lines
  joined in order with nothing added (the rows keep their own newlines). It needs the data set in the local
  cache; with no hub reachable, the error says what to use instead.
- austen: Jane Austen's six novels from Debian's r-cran-janeaustenr (R lazy-load data, read without R), in
  publication order, each novel's lines joined by newlines and the novels separated by a blank line.
- any local text file (UTF-8).

Tokens: the joined text is tokenized once, with the tokenizer's own default for special tokens, so a model whose
tokenizer adds a BOS sees it once, at the start of the stream (block 0), as in the paper's single tokenization.
--bos block instead starts every block with the BOS and fills the other L-1 positions from the stream.
Blocks: aligned, non-overlapping windows of L tokens from the start of the stream (the remainder is dropped),
each giving L-1 next-token predictions. The sha256 of the blocks' token ids (int32, little-endian) is the
signature that a resumed or repeated run must reproduce."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from softbench.core.errors import UnsupportedError, UsageError

AUSTEN_DIRS = ("/usr/lib/R/site-library/janeaustenr", "/usr/local/lib/R/site-library/janeaustenr",
               "/usr/lib/R/library/janeaustenr")
# publication order, as janeaustenr::austen_books() lists them
AUSTEN_BOOKS = ("sensesensibility", "prideprejudice", "mansfieldpark", "emma", "northangerabbey", "persuasion")
WIKITEXT = ("Salesforce/wikitext", "wikitext-103-raw-v1", "test")
BOS_MODES = ("stream", "block")


@dataclass(frozen=True)
class CorpusText:
    name: str
    source: str
    text: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    def describe(self) -> dict:
        return {"name": self.name, "source": self.source, "chars": len(self.text), "text_sha256": self.sha256}


def find_austen() -> Path:
    for d in AUSTEN_DIRS:
        rdx = Path(d) / "data" / "Rdata.rdx"
        if rdx.is_file():
            return rdx
    raise UsageError("the Austen corpus needs Debian's r-cran-janeaustenr (R data, read here without R)",
                     hint="apt-get install r-cran-janeaustenr, or pass the novels as a text file: --corpus PATH")


def austen_text(rdx: Path | None = None) -> CorpusText:
    from softbench.fidelity.rlazyload import read_lazyload

    rdx = rdx or find_austen()
    books = read_lazyload(rdx, list(AUSTEN_BOOKS))
    text = "\n\n".join("\n".join(str(line) for line in books[b]) for b in AUSTEN_BOOKS)
    return CorpusText("austen", str(rdx), text)


def wikitext_text() -> CorpusText:
    repo, config, split = WIKITEXT
    hint = ("no data-set hub is reachable from softbench: use --corpus austen, or pass the WikiText-103 test "
            "file as plain text (--corpus wiki.test.raw)")
    try:
        import datasets
    except ImportError:
        raise UnsupportedError("--corpus wikitext-103 needs the `datasets` package and a cached copy of "
                               f"{repo}/{config}", hint=hint) from None
    try:
        ds = datasets.load_dataset(repo, config, split=split)
    except Exception as e:  # datasets raises many types for "not cached and offline"
        raise UnsupportedError(f"WikiText-103 ({repo}, {config}, {split}) could not be loaded: "
                               f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", hint=hint) from None
    return CorpusText("wikitext-103", f"{repo}/{config}/{split}", "".join(ds["text"]))


def load_corpus(spec: str) -> CorpusText:
    if spec == "wikitext-103":
        return wikitext_text()
    if spec == "austen":
        return austen_text()
    p = Path(spec).expanduser()
    if not p.is_file():
        raise UsageError(f"--corpus {spec!r}: not wikitext-103, austen, or an existing text file")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{p} is not UTF-8 text: {e}") from None
    if not text.strip():
        raise UsageError(f"{p} is empty")
    return CorpusText(p.name, str(p.resolve()), text)


def tokenize(tokenizer, text: str) -> np.ndarray:
    """The whole text as one stream of token ids (int64), with the tokenizer's default special tokens."""
    ids = tokenizer(text, return_attention_mask=False)["input_ids"]
    return np.asarray(ids, dtype=np.int64)


def make_blocks(stream: np.ndarray, block_len: int, max_blocks: int | None = None, bos: str = "stream",
                bos_id: int | None = None) -> np.ndarray:
    """(n_blocks, block_len) aligned blocks; the remainder is dropped. bos="block" puts `bos_id` first in every
    block and fills L-1 positions from the stream (strides of L-1)."""
    if block_len < 2:
        raise UsageError("--block-len must be at least 2 (one prediction)")
    if bos not in BOS_MODES:
        raise UsageError(f"--bos must be one of {', '.join(BOS_MODES)}")
    if bos == "block":
        if bos_id is None:
            raise UsageError("--bos block: this tokenizer has no BOS token", hint="use --bos stream")
        stream = stream[1:] if stream.size and stream[0] == bos_id else stream  # the stream's own BOS is not text
        step = block_len - 1
    else:
        step = block_len
    n = stream.size // step
    if max_blocks is not None:
        n = min(n, max_blocks)
    if n == 0:
        raise UsageError(f"the corpus has {stream.size} tokens, fewer than one block of {block_len}")
    body = stream[: n * step].reshape(n, step)
    if bos == "block":
        body = np.concatenate([np.full((n, 1), bos_id, dtype=body.dtype), body], axis=1)
    return np.ascontiguousarray(body)


def token_signature(blocks: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(blocks, dtype="<i4").tobytes()).hexdigest()
