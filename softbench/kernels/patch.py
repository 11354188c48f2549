"""Fail-closed source patcher for FlashAttention-4.

A patch is a list of textual edits at named anchors. It never touches the installed package: it copies the
installed `flash_attn` sources into a private folder keyed by FA4 version, patch name and patch version, checks
that every anchor occurs exactly the expected number of times, applies the edits, checks that every edited file
still parses, and records the sha256 of every file it wrote. Any mismatch refuses with a PatchError that names
the anchor: a patch written for other sources must not run."""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from softbench.core.errors import PatchError, UnsupportedError

FA4_DIST = "flash-attn-4"
FA4_PINNED = "4.0.0b36"  # the sources every anchor below was written against
MANIFEST = ".softbench-patch.json"


@dataclass(frozen=True)
class Edit:
    name: str  # the anchor's name, used in refusals
    file: str  # path relative to the flash_attn package folder, e.g. "cute/softmax.py"
    anchor: str
    replacement: str
    count: int = 1  # how many times the anchor must occur; all occurrences are replaced


@dataclass(frozen=True)
class NewFile:
    file: str
    text: str


@dataclass(frozen=True)
class Patch:
    name: str
    version: str
    description: str
    edits: tuple[Edit, ...] = ()
    new_files: tuple[NewFile, ...] = ()
    fa4_version: str = FA4_PINNED
    # architecture families (9 = sm_90, 10 = sm_100) whose kernels the edits change; None = every family FA4 has.
    # A variant run elsewhere would silently be the stock kernel, so the backend refuses it.
    arch_families: tuple[int, ...] | None = None


@dataclass
class PatchedTree:
    """A private copy of flash_attn: put `root` first on sys.path to import it."""

    root: Path
    patch: str
    patch_version: str
    fa4_version: str
    file_sha256: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"root": str(self.root), "patch": self.patch, "patch_version": self.patch_version,
                "fa4_version": self.fa4_version, "file_sha256": self.file_sha256}


def sha256_file(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def installed_fa4() -> tuple[Path, str]:
    """The installed flash_attn package folder and the flash-attn-4 version, without importing it."""
    try:
        version = importlib.metadata.version(FA4_DIST)
    except importlib.metadata.PackageNotFoundError:
        raise UnsupportedError(
            f"{FA4_DIST} is not installed",
            hint=f"pip install {FA4_DIST}=={FA4_PINNED} (add --no-deps on a machine without a GPU), or use --backend sim",
        ) from None
    spec = importlib.util.find_spec("flash_attn")
    if spec is None or not spec.submodule_search_locations:
        raise UnsupportedError(f"{FA4_DIST} {version} is installed but the flash_attn package cannot be found")
    for loc in spec.submodule_search_locations:
        if (Path(loc) / "cute" / "interface.py").exists():
            return Path(loc), version
    raise UnsupportedError(f"{FA4_DIST} {version}: no flash_attn/cute/interface.py on the search path")


def apply_edits(sources: dict[str, str], patch: Patch) -> dict[str, str]:
    """Pure function: the edited texts of the files `patch` touches. Refuses (PatchError) when an anchor's
    count differs from what the patch expects, or a new file would replace an existing one."""
    out = dict(sources)
    for e in patch.edits:
        if e.file not in out:
            raise PatchError(f"patch {patch.name}: anchor {e.name!r} needs {e.file}, which does not exist")
        found = out[e.file].count(e.anchor)
        if found != e.count:
            raise PatchError(
                f"patch {patch.name}: anchor {e.name!r} occurs {found} times in {e.file}, expected {e.count}; "
                "the FA4 sources differ from what the patch was written for, so it refuses to run",
                hint=f"install {FA4_DIST}=={patch.fa4_version}",
            )
        out[e.file] = out[e.file].replace(e.anchor, e.replacement)
    for nf in patch.new_files:
        if nf.file in sources:
            raise PatchError(f"patch {patch.name}: new file {nf.file} already exists in the FA4 sources")
        out[nf.file] = nf.text
    for name in touched_files(patch):
        try:
            ast.parse(out[name], filename=name)
        except SyntaxError as err:
            raise PatchError(f"patch {patch.name}: {name} does not parse after patching: {err}") from None
    return out


def touched_files(patch: Patch) -> list[str]:
    return sorted({e.file for e in patch.edits} | {nf.file for nf in patch.new_files})


def _read_sources(pkg: Path, names) -> dict[str, str]:
    return {n: (pkg / n).read_text(encoding="utf-8") for n in names if (pkg / n).exists()}


def _tree_fingerprint(pkg: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(pkg.rglob("*.py")):
        h.update(str(p.relative_to(pkg)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:12]


def default_cache_root() -> Path:
    return Path(os.environ.get("SOFTBENCH_CACHE", Path.home() / ".cache" / "softbench")) / "fa4"


def build_patched_tree(patch: Patch, cache_root: Path | None = None, source_pkg: Path | None = None,
                       source_version: str | None = None) -> PatchedTree:
    """Copy the installed flash_attn into cache_root/<fa4>-<patch>-<version>-<source fingerprint>/ and apply
    `patch` there. An existing copy is reused only if every recorded file hash still matches."""
    if source_pkg is None:
        source_pkg, source_version = installed_fa4()
    if source_version != patch.fa4_version:
        raise PatchError(
            f"patch {patch.name} is written for {FA4_DIST} {patch.fa4_version}, found {source_version}; refusing",
            hint=f"pip install {FA4_DIST}=={patch.fa4_version}",
        )
    cache_root = Path(cache_root) if cache_root else default_cache_root()
    key = f"{source_version}-{patch.name}-{patch.version}-{_tree_fingerprint(source_pkg)}"
    root = cache_root / key
    manifest = root / MANIFEST
    if manifest.exists():
        tree = PatchedTree(**{k: v for k, v in json.loads(manifest.read_text()).items() if k != "root"},
                           root=root)
        if all((root / "flash_attn" / f).exists() and sha256_file(root / "flash_attn" / f) == h
               for f, h in tree.file_sha256.items()):
            return tree
        shutil.rmtree(root)  # tampered or half-written: rebuild from the installed sources
    edited = apply_edits(_read_sources(source_pkg, {e.file for e in patch.edits}), patch)
    cache_root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=cache_root, prefix=f".{key}."))
    try:
        dst = tmp / "flash_attn"
        shutil.copytree(source_pkg, dst, ignore=shutil.ignore_patterns("__pycache__"))
        # a regular package here shadows the namespace package elsewhere on sys.path: no mixing of trees
        (dst / "__init__.py").write_text("# private softbench copy of flash_attn; see .softbench-patch.json\n")
        for name, text in edited.items():
            (dst / name).write_text(text, encoding="utf-8")
        hashes = {str(p.relative_to(dst)): sha256_file(p) for p in sorted(dst.rglob("*.py"))}
        tree = PatchedTree(root=root, patch=patch.name, patch_version=patch.version,
                           fa4_version=source_version, file_sha256=hashes)
        (tmp / MANIFEST).write_text(json.dumps({k: v for k, v in tree.to_dict().items() if k != "root"}, indent=1))
        try:
            os.rename(tmp, root)
        except OSError:  # another process built the same tree first: use theirs
            shutil.rmtree(tmp, ignore_errors=True)
            return build_patched_tree(patch, cache_root, source_pkg, source_version)
        return tree
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
