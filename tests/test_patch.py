"""The fail-closed FA4 patcher against the real, pinned FA4 sources."""

import ast
import hashlib
import shutil
import struct

import pytest

from softbench import operators
from softbench.errors import PatchError
from softbench.kernels import fa4_patches as P
from softbench.kernels.patch import Edit, NewFile, Patch, apply_edits, build_patched_tree, installed_fa4

from conftest import fa4_installed

needs_fa4 = pytest.mark.skipif(not fa4_installed(), reason="pip install --no-deps flash-attn-4==4.0.0b36")


def tree_hash(root):
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        h.update(p.read_bytes())
    return h.hexdigest()


def test_apply_edits_counts_every_anchor():
    src = {"a.py": "x = 1\nx = 1\n"}
    ok = Patch("t", "1", "", edits=(Edit("twice", "a.py", "x = 1\n", "x = 2\n", count=2),))
    assert apply_edits(src, ok)["a.py"] == "x = 2\nx = 2\n"
    once = Patch("t", "1", "", edits=(Edit("once", "a.py", "x = 1\n", "x = 2\n", count=1),))
    with pytest.raises(PatchError, match="anchor 'once' occurs 2 times"):
        apply_edits(src, once)
    missing = Patch("t", "1", "", edits=(Edit("gone", "a.py", "y = 1\n", "", count=1),))
    with pytest.raises(PatchError, match="'gone' occurs 0 times"):
        apply_edits(src, missing)


def test_apply_edits_refuses_broken_python_and_clobbering():
    src = {"a.py": "x = 1\n"}
    broken = Patch("t", "1", "", edits=(Edit("e", "a.py", "x = 1\n", "x = (\n"),))
    with pytest.raises(PatchError, match="does not parse"):
        apply_edits(src, broken)
    clobber = Patch("t", "1", "", new_files=(NewFile("a.py", "y = 1\n"),))
    with pytest.raises(PatchError, match="already exists"):
        apply_edits(src, clobber)


@needs_fa4
@pytest.mark.parametrize("patch", [P.FA4_PATCHES.get(n) for n in P.FA4_PATCHES], ids=lambda p: p.name)
def test_patches_apply_to_the_pinned_sources(tmp_path, patch):
    pkg, version = installed_fa4()
    assert version == "4.0.0b36"
    before = tree_hash(pkg)
    tree = build_patched_tree(patch, cache_root=tmp_path)
    assert tree_hash(pkg) == before, "the installed package must never be touched"
    root = tree.root / "flash_attn"
    for rel, digest in tree.file_sha256.items():
        assert hashlib.sha256((root / rel).read_bytes()).hexdigest() == digest
    for e in patch.edits:
        ast.parse((root / e.file).read_text())
        if e.anchor not in e.replacement:
            assert e.anchor not in (root / e.file).read_text()
    # reused when intact; rebuilt when a file was tampered with
    assert build_patched_tree(patch, cache_root=tmp_path).root == tree.root
    victim = root / "cute" / "softmax.py"
    victim.write_text(victim.read_text() + "\n# tampered\n")
    rebuilt = build_patched_tree(patch, cache_root=tmp_path)
    assert "# tampered" not in (rebuilt.root / "flash_attn" / "cute" / "softmax.py").read_text()


@needs_fa4
def test_changed_source_is_refused_and_names_the_anchor(tmp_path):
    pkg, version = installed_fa4()
    fake = tmp_path / "src" / "flash_attn"
    shutil.copytree(pkg, fake)
    sm = fake / "cute" / "softmax.py"
    text = sm.read_text()
    # one of the two exp2 sites changed upstream: the patch must refuse, not patch one site only
    sm.write_text(text.replace("acc_S_row * scale_log2 - row_max_cur_scaled, fastmath=True",
                               "acc_S_row * scale_log2 - row_max_cur_scaled, fastmath=False", 1))
    with pytest.raises(PatchError, match="sm90-online-softmax-exp2"):
        build_patched_tree(P.ROWMAX_H15, cache_root=tmp_path / "cache", source_pkg=fake, source_version=version)
    assert not any((tmp_path / "cache").glob("4.0.0b36-rowmax-h15-*")), "nothing half-built may remain"


def test_other_fa4_version_is_refused(tmp_path):
    with pytest.raises(PatchError, match="written for flash-attn-4 4.0.0b36"):
        build_patched_tree(P.ROWMAX_H15, cache_root=tmp_path, source_pkg=tmp_path, source_version="4.0.0b35")


def _f32_hex(x):
    return "0f%08X" % struct.unpack("<I", struct.pack("<f", x))[0]


def test_kernel_ptx_uses_the_torch_operators_constants():
    ptx = P.H15_MODULE
    assert f"max.f32 sbc, $1, {_f32_hex(operators.CLAMP_DOUBLED)}" in ptx
    assert f"add.rn.f32 sby, sbc, {_f32_hex(operators.MAGIC_FOLDED)}" in ptx
    assert f"shl.b32 sbw, sbb, {operators.SHIFT}" in ptx
    ast.parse(ptx)
