"""Read objects from an R lazy-load database (`name.rdx` + `name.rdb`) without R.

R packages keep their data sets this way (e.g. janeaustenr's data/Rdata.rdb). The .rdx file is a serialized R
list, gzip-compressed like an .rds file, with `variables` (name -> c(offset, length) into the .rdb), `references`
(environments; none for plain data) and `compressed`. Each .rdb entry is a 4-byte big-endian length of the
uncompressed payload followed by the compressed payload: zlib when `compressed` is TRUE or 1; for 2 and 3 a
fifth byte names the method ('Z' xz, '2' bzip2, '1' zlib, '0' stored). The payload is an R serialization,
which PyPI `rdata` parses and converts to Python (a character vector becomes a numpy array of str)."""

from __future__ import annotations

import bz2
import lzma
import struct
import zlib
from pathlib import Path
from typing import Any

from softbench.core.errors import UnsupportedError, UsageError


def _rdata():
    try:
        import rdata
    except ImportError:
        raise UnsupportedError("reading R data needs the PyPI package rdata", hint="pip install rdata") from None
    return rdata


def decode_entry(blob: bytes, compressed: int) -> bytes:
    """The serialized payload of one .rdb entry."""
    if len(blob) < 4:
        raise UsageError("R lazy-load entry shorter than its 4-byte length header")
    (length,) = struct.unpack(">I", blob[:4])
    if compressed in (0, False):
        payload = blob[4:]
    elif compressed in (1, True):
        payload = zlib.decompress(blob[4:])
    elif compressed in (2, 3):
        method, body = blob[4:5], blob[5:]
        if method == b"Z":
            payload = lzma.decompress(body, format=lzma.FORMAT_XZ)
        elif method == b"2":
            payload = bz2.decompress(body)
        elif method == b"1":
            payload = zlib.decompress(body)
        elif method == b"0":
            payload = body
        else:
            raise UsageError(f"R lazy-load entry with unknown compression byte {method!r}")
    else:
        raise UsageError(f"R lazy-load database with unknown compression {compressed!r}")
    if len(payload) != length:
        raise UsageError(f"R lazy-load entry: header says {length} bytes, payload has {len(payload)}")
    return payload


def parse_serialized(payload: bytes) -> Any:
    rdata = _rdata()
    return rdata.conversion.convert(rdata.parser.parse_data(payload, extension=".rds"))


def read_index(rdx: Path) -> dict:
    rdata = _rdata()
    index = rdata.read_rds(str(rdx))
    if "variables" not in index:
        raise UsageError(f"{rdx} is not an R lazy-load index (no 'variables')")
    return index


def _compression_flag(index: dict) -> int:
    c = index.get("compressed", True)
    c = c[0] if hasattr(c, "__len__") and not isinstance(c, (str, bytes)) else c
    return int(c) if not isinstance(c, bool) else (1 if c else 0)


def read_lazyload(rdx: Path | str, names: list[str] | None = None) -> dict[str, Any]:
    """name -> converted object for every variable (or `names`) of the database next to `rdx`."""
    rdx = Path(rdx)
    rdb = rdx.with_suffix(".rdb")
    if not rdx.is_file() or not rdb.is_file():
        raise UsageError(f"R lazy-load database {rdx.with_suffix('')}.rdx/.rdb not found")
    index = read_index(rdx)
    if index.get("references"):
        raise UnsupportedError(f"{rdx}: entries that reference environments are not supported")
    flag = _compression_flag(index)
    variables = {str(k): v for k, v in index["variables"].items()}
    wanted = names or list(variables)
    missing = [n for n in wanted if n not in variables]
    if missing:
        raise UsageError(f"{rdx} has no variable(s) {', '.join(missing)} (has {', '.join(variables)})")
    out = {}
    with open(rdb, "rb") as f:
        for name in wanted:
            offset, length = (int(x) for x in variables[name])
            f.seek(offset)
            out[name] = parse_serialized(decode_entry(f.read(length), flag))
    return out
