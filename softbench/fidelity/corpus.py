"""Evaluation text, its token stream and the aligned blocks.

Corpora (--corpus):
- wikitext-103: the raw test split through `datasets` (Salesforce/wikitext, wikitext-103-raw-v1), its lines
  joined in order with nothing added (the rows keep their own newlines); from the cache or downloaded into it,
  as softbench.fidelity.hub says (HF_HUB_OFFLINE=1: the cache only).
- hf:OWNER/NAME[:CONFIG[:SPLIT]]: any Hub data set with a `text` column, the same way (split: test).
- austen: Jane Austen's six novels from Debian's r-cran-janeaustenr (R lazy-load data, read without R), in
  publication order, each novel's lines joined by newlines and the novels separated by a blank line. Found where
  Debian installs it, or unpacked into the environment by `make setup` (share/softbench/janeaustenr).
- a folder written by `datasets` (Dataset.save_to_disk; a DatasetDict gives its test split), `text` column.
- a .jsonl file: one JSON object per line, its `text` field (or a JSON string per line), lines joined by
  newlines.
- any other file: UTF-8 plain text.
Every text is checked before a tokenizer or model loads: empty, binary (NUL bytes or control characters) or
part-of-speech tagged (word/TAG tokens, as the Brown corpus ships) is refused, since a model's NLL on such text
measures the markup, not the language.

Tokens: the joined text is tokenized once, with the tokenizer's own default for special tokens. BOS (--bos):
auto (the default) puts the BOS first in every block where the tokenizer adds one (the regime such models are
trained and evaluated in) and uses the plain stream where it adds none; block: BOS first in every block, the
other L-1 positions from the stream; stream: the stream as it is, so a tokenizer's BOS stands only before
block 0, with a warning when the tokenizer adds one.
Blocks: aligned, non-overlapping windows of L tokens from the start of the stream (the remainder is dropped),
each giving L-1 next-token predictions. The sha256 of the blocks' token ids (int32, little-endian) is the
signature that a resumed or repeated run must reproduce."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from softbench.core.errors import UnsupportedError, UsageError

AUSTEN_SUBDIR = "usr/lib/R/site-library/janeaustenr"
AUSTEN_DIRS = ("/usr/lib/R/site-library/janeaustenr", "/usr/local/lib/R/site-library/janeaustenr",
               "/usr/lib/R/library/janeaustenr")
# where `make setup` unpacks Debian's package (no R needed), inside the environment softbench runs in
SETUP_AUSTEN = Path(sys.prefix) / "share" / "softbench" / "janeaustenr" / AUSTEN_SUBDIR
# publication order, as janeaustenr::austen_books() lists them
AUSTEN_BOOKS = ("sensesensibility", "prideprejudice", "mansfieldpark", "emma", "northangerabbey", "persuasion")
WIKITEXT = ("Salesforce/wikitext", "wikitext-103-raw-v1", "test")
HUB_PREFIX = "hf:"
BOS_MODES = ("auto", "stream", "block")
TEXT_COLUMN = "text"
LOCAL_HINT = ("use --corpus austen (make setup unpacks it), or a local text file: --corpus PATH (.txt, .jsonl, or "
              "a folder written by datasets' save_to_disk)")
# a word/TAG token as in the Brown corpus ("The/at Fulton/np-tl County/nn-tl"); TAGs are short, no digits
_TAGGED = re.compile(r"^[^/\s]+/[A-Za-z$*+.,:()'`-]{1,10}$")
_SAMPLE_CHARS = 200_000  # the checks read this much of the text: enough for a verdict, quick on any corpus


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


def check_text(text: str, source: str) -> None:
    """Refuse text that is empty, binary, or tagged; one sentence each."""
    if not text.strip():
        raise UsageError(f"{source} is empty (no text to evaluate)")
    sample = text[:_SAMPLE_CHARS]
    if "\x00" in sample:
        raise UsageError(f"{source} looks binary (it holds NUL bytes), not text", hint=LOCAL_HINT)
    control = sum(1 for ch in sample if ord(ch) < 32 and ch not in "\t\n\r\f\v")
    if control > 0.01 * len(sample):
        raise UsageError(f"{source} looks binary ({control} control characters in its first {len(sample)}), "
                         "not text", hint=LOCAL_HINT)
    words = sample.split()
    tagged = sum(1 for w in words if _TAGGED.match(w))
    if words and tagged > 0.5 * len(words):
        raise UsageError(f"{source} looks part-of-speech tagged ({tagged} of its first {len(words)} words are "
                         "word/TAG, as in the Brown corpus): a model's NLL on it would measure the tags",
                         hint="pass the untagged text (strip the /TAG suffixes) or another corpus")


def find_austen() -> Path:
    for d in (*AUSTEN_DIRS, SETUP_AUSTEN):
        rdx = Path(d) / "data" / "Rdata.rdx"
        if rdx.is_file():
            return rdx
    raise UsageError("the Austen corpus needs Debian's r-cran-janeaustenr (R data, read here without R)",
                     hint="make setup unpacks it into the environment (make corpus), or apt-get install "
                          "r-cran-janeaustenr; or pass the novels as a text file: --corpus PATH")


def austen_text(rdx: Path | None = None) -> CorpusText:
    from softbench.fidelity.rlazyload import read_lazyload

    rdx = rdx or find_austen()
    books = read_lazyload(rdx, list(AUSTEN_BOOKS))
    text = "\n\n".join("\n".join(str(line) for line in books[b]) for b in AUSTEN_BOOKS)
    return CorpusText("austen", str(rdx), text)


def _datasets(what: str):
    try:
        import datasets
    except ImportError:
        raise UnsupportedError(f"{what} needs the `datasets` package (pip install datasets)",
                               hint=LOCAL_HINT) from None
    return datasets


def _column_text(ds, source: str) -> str:
    if TEXT_COLUMN not in ds.column_names:
        raise UsageError(f"{source} has no '{TEXT_COLUMN}' column (it has {', '.join(ds.column_names)})")
    return "".join(ds[TEXT_COLUMN])


def hub_dataset_text(repo: str, config: str | None, split: str, name: str | None = None) -> CorpusText:
    """A Hub data set's split through `datasets`: from the cache, or downloaded into it (hub.py)."""
    from softbench.fidelity import hub

    label = "/".join(filter(None, [repo, config, split]))
    datasets = _datasets(f"--corpus {name or HUB_PREFIX + label}")
    try:
        with hub.retries_unlogged():
            ds = datasets.load_dataset(repo, config, split=split)
    except Exception as e:  # datasets raises many types for "not cached", "offline" and "no such data set"
        raise hub.load_error(f"data set {label}", e, LOCAL_HINT) from None
    return CorpusText(name or label, label, _column_text(ds, label))


def wikitext_text() -> CorpusText:
    repo, config, split = WIKITEXT
    return hub_dataset_text(repo, config, split, name="wikitext-103")


def _saved_dataset_text(folder: Path) -> CorpusText:
    datasets = _datasets(f"the data set folder {folder}")
    try:
        ds = datasets.load_from_disk(str(folder))
    except Exception as e:
        raise UsageError(f"{folder} could not be read as a saved data set: {type(e).__name__}: {e}") from None
    if isinstance(ds, datasets.DatasetDict):
        if "test" not in ds:
            raise UsageError(f"{folder} holds the splits {', '.join(ds)}, no 'test'",
                             hint="pass the folder of one split")
        ds = ds["test"]
    return CorpusText(folder.name, str(folder.resolve()), _column_text(ds, str(folder)))


def _read_utf8(p: Path) -> str:
    data = p.read_bytes()
    if b"\x00" in data[:_SAMPLE_CHARS]:
        raise UsageError(f"{p} looks binary (it holds NUL bytes), not text", hint=LOCAL_HINT)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{p} is not UTF-8 text (byte {e.start}: {data[e.start:e.start + 1]!r})",
                         hint="convert it (iconv -t utf-8) or pass another corpus") from None


def _jsonl_text(p: Path) -> str:
    parts = []
    for n, line in enumerate(_read_utf8(p).splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise UsageError(f"{p} line {n} is not JSON: {e.msg}") from None
        except RecursionError:  # a line nested past the JSON parser's depth
            raise UsageError(f"{p} line {n} nests too deeply to be a corpus record") from None
        if isinstance(obj, dict) and isinstance(obj.get(TEXT_COLUMN), str):
            parts.append(obj[TEXT_COLUMN])
        elif isinstance(obj, str):
            parts.append(obj)
        else:
            raise UsageError(f"{p} line {n} is neither a JSON string nor an object with a string "
                             f"'{TEXT_COLUMN}' field")
    return "\n".join(parts)


# the corpora --corpus takes by name, each read by its loader
NAMED_CORPORA = {"wikitext-103": wikitext_text, "austen": austen_text}


def names_no_path(spec: str) -> bool:
    """Whether --corpus SPEC is a named corpus or a Hub dataset id, which read_corpus and portable_spec both take
    before any path, so that --corpus austen stays the named corpus even beside a file called austen."""
    return spec in NAMED_CORPORA or spec.startswith(HUB_PREFIX)


def read_corpus(spec: str) -> CorpusText:
    """The text --corpus names, unchecked: a named corpus or a Hub dataset (names_no_path), else a local file or
    folder."""
    if spec in NAMED_CORPORA:
        return NAMED_CORPORA[spec]()
    if spec.startswith(HUB_PREFIX):
        repo, config, split = (spec[len(HUB_PREFIX):].split(":") + [None, None])[:3]
        if repo.count("/") != 1:
            raise UsageError(f"--corpus {spec!r}: {HUB_PREFIX}OWNER/NAME[:CONFIG[:SPLIT]]")
        return hub_dataset_text(repo, config or None, split or "test")
    p = Path(spec).expanduser()
    if p.is_dir():
        if not any((p / f).is_file() for f in ("state.json", "dataset_dict.json")):
            raise UsageError(f"--corpus {spec}: a folder, but not one written by datasets' save_to_disk",
                             hint=LOCAL_HINT)
        return _saved_dataset_text(p)
    if not p.is_file():
        raise UsageError(f"--corpus {spec!r}: not {', '.join(NAMED_CORPORA)}, {HUB_PREFIX}OWNER/NAME, or an "
                         "existing file or folder", hint=LOCAL_HINT)
    text = _jsonl_text(p) if p.suffix == ".jsonl" else _read_utf8(p)
    return CorpusText(p.name, str(p.resolve()), text)


def portable_spec(spec: str) -> str:
    """--corpus as options.json keeps it: a local file or folder that exists as an absolute path, since --resume
    reads it back from whatever folder it is run in; the named corpora and hf: ids as given (names_no_path)."""
    if names_no_path(spec):
        return spec
    p = Path(spec).expanduser()
    # absolute() and not resolve(): the path as the user named it, symbolic links kept
    return str(p.absolute()) if p.exists() else spec


def load_corpus(spec: str) -> CorpusText:
    """The text --corpus names, checked (check_text)."""
    c = read_corpus(spec)
    check_text(c.text, c.source)
    return c


def adds_bos(tokenizer) -> bool:
    """Whether the tokenizer puts its BOS before a text on its own (its default for special tokens)."""
    bos = tokenizer.bos_token_id
    if bos is None:
        return False
    ids = tokenizer("a", return_attention_mask=False)["input_ids"]
    return len(ids) > 0 and ids[0] == bos


def resolve_bos(requested: str, adds: bool) -> tuple[str, str, str | None]:
    """(mode, note for the summary, warning or None) for --bos `requested` with a tokenizer that does or does not
    put a BOS first on its own (`adds_bos`)."""
    if requested == "auto":
        if adds:
            return "block", "auto: the tokenizer adds a BOS, so every block starts with it", None
        return "stream", "auto: the tokenizer adds no BOS, so blocks are plain windows of the stream", None
    if requested == "stream" and adds:
        return "stream", "stream, as asked", ("--bos stream: the tokenizer adds a BOS, and only block 0 starts with "
                                              "it; the other blocks run without the BOS the model was trained "
                                              "with (missing BOS can cost the first tokens of a block nats and "
                                              "change a dNLL's sign); --bos block (the auto default here) avoids it")
    return requested, f"{requested}, as asked", None


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
    if bos not in ("stream", "block"):
        raise UsageError("make_blocks takes --bos stream or block (auto is resolved first: resolve_bos)")
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
