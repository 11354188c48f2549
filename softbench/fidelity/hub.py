"""Hugging Face's loading conventions, and what a failed load says.

A Hub id (a model, or a data set through `datasets`) loads from the local cache or is downloaded into it;
HF_HUB_OFFLINE=1 (or `--offline`, which sets it) means no request at all, only the cache. huggingface_hub,
transformers and datasets read HF_HUB_OFFLINE and HF_ENDPOINT when they are first imported, so `--offline`
sets the variable before any of them is imported; softbench also passes local_files_only=True then, which
makes no request whatever the libraries read at import.

A failure says which of the two happened (offline: nothing was asked of the Hub; online: the Hub was asked and
what it answered or why it could not be reached) and what to do next, in one sentence and a hint. A name the
Hub does not have, or will not give without a login, is the user's to mend (bad input, exit 2); a copy that
is not in the cache of a machine that may not or cannot download it is this machine's limit (exit 3), as
the same command runs on a connected one."""

from __future__ import annotations

import os
from contextlib import contextmanager

from softbench.core.errors import SoftbenchError, UnsupportedError, UsageError

DEFAULT_ENDPOINT = "https://huggingface.co"
_TRUE = {"1", "on", "yes", "true"}


def go_offline() -> None:
    """--offline: the Hub libraries, imported after this, make no request."""
    os.environ["HF_HUB_OFFLINE"] = "1"


def is_offline() -> bool:
    """As huggingface_hub decides it (HF_HUB_OFFLINE, or the older TRANSFORMERS_OFFLINE)."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().lower() in _TRUE


def endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", DEFAULT_ENDPOINT).rstrip("/")


@contextmanager
def retries_unlogged():
    """While a load from the Hub runs, huggingface_hub logs no warnings: it logs one line for each request it retries
    and each pause before the next (eleven lines for a machine that cannot resolve the Hub's name), and a failed
    load ends in softbench's own sentence, which says what the Hub answered. Its verbosity is restored after."""
    from huggingface_hub.utils import logging as hub_logging

    before = hub_logging.get_verbosity()
    hub_logging.set_verbosity_error()
    try:
        yield
    finally:
        hub_logging.set_verbosity(before)


def load_kwargs() -> dict:
    """from_pretrained keywords: the cache alone when offline; otherwise the library's own default (cache first,
    then download)."""
    return {"local_files_only": True} if is_offline() else {}


def _chain(err: BaseException):
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        yield err
        err = err.__cause__ or err.__context__


def classify(err: BaseException) -> str:
    """'gated' (the Hub wants a login or an accepted licence), 'missing' (it answered: no such repository, file
    or revision, which is also its answer for a private one), or 'network' (it could not be asked or did not
    answer). The exception types decide (huggingface_hub's errors, kept in the chain by transformers and
    datasets); the message only where no type does."""
    names = {type(e).__name__ for e in _chain(err)}
    if "GatedRepoError" in names:
        return "gated"
    if names & {"RepositoryNotFoundError", "RevisionNotFoundError", "EntryNotFoundError",
                "RemoteEntryNotFoundError", "DatasetNotFoundError"}:
        return "missing"
    text = " ".join(str(e) for e in _chain(err)).lower()
    if "is not a valid model identifier" in text or "doesn't exist on the hub" in text \
            or "does not appear to have a file named" in text:
        return "missing"
    return "network"


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0] if text else ''}"


def load_error(what: str, err: BaseException, local_hint: str) -> SoftbenchError:
    """The one-sentence error for `what` (e.g. "model Qwen/Qwen2.5-0.5B") that could not be loaded."""
    if is_offline():
        return UnsupportedError(f"{what} is not in the local Hugging Face cache, and HF_HUB_OFFLINE=1 (or --offline) "
                          f"allowed no download, so no request was made ({_first_line(err)})",
                          hint="run once on a connected machine without HF_HUB_OFFLINE (and --offline) to download "
                               f"it into the cache (HF_HOME), or {local_hint}")
    kind = classify(err)
    where = endpoint()
    if kind == "gated":
        return UsageError(f"{what}: {where} refused the download (a gated or private repository)",
                          hint="accept the licence on its Hub page and log in (hf auth login, or HF_TOKEN); "
                               f"or {local_hint}")
    if kind == "missing":
        return UsageError(f"{what} is not in the local cache and {where} has no such repository or file "
                          f"({_first_line(err)})", hint="check the name (a private or gated repository answers the "
                                                        f"same: log in with hf auth login or HF_TOKEN), or {local_hint}")
    return UnsupportedError(f"{what} is not in the local cache and could not be downloaded from {where} "
                      f"({_first_line(err)})",
                      hint="on a machine without a network, set HF_HUB_OFFLINE=1 (or --offline) and use a cached "
                           f"copy; or {local_hint}")
