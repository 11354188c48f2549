"""The fail-closed FA4 patcher against the real, pinned FA4 sources."""

import ast
import hashlib
import shutil
import math
import struct
import sys

import pytest
import torch

from softbench import operators
from softbench.core.errors import PatchError
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


_REFUSED = {
    "an edit that does not parse": (Patch("t", "1", "", edits=(Edit("e", "a.py", "x = 1\n", "x = (\n"),)),
                                     "a.py does not parse"),
    "a new file over an old one": (Patch("t", "1", "", new_files=(NewFile("a.py", "y = 1\n"),)), "already exists"),
    "an anchor in a missing file": (Patch("t", "1", "", edits=(Edit("elsewhere", "b.py", "x = 1\n", "x = 2\n"),)),
                                    "anchor 'elsewhere' needs b.py, which does not exist"),
    # a new file is checked like an edited one: a module that does not parse is never written
    "a new file that does not parse": (Patch("t", "1", "", new_files=(NewFile("b.py", "def f(:\n"),)),
                                       "b.py does not parse"),
}


@pytest.mark.parametrize("case", sorted(_REFUSED))
def test_apply_edits_refuses_what_it_cannot_apply_whole(case):
    patch, says = _REFUSED[case]
    with pytest.raises(PatchError, match=says):
        apply_edits({"a.py": "x = 1\n"}, patch)


# a stand-in for the installed flash_attn: the cache logic of build_patched_tree on a few files, without FA4
TOY = Patch("toy", "1", "", edits=(Edit("one", "cute/softmax.py", "x = 1\n", "x = 2\n"),), fa4_version="0.toy")


def _toy_pkg(root, extra="y = 0\n"):
    pkg = root / "flash_attn"
    (pkg / "cute").mkdir(parents=True)
    (pkg / "cute" / "softmax.py").write_text("x = 1\n")
    (pkg / "cute" / "other.py").write_text(extra)
    return pkg


def test_a_source_without_the_patched_file_is_refused_by_name(tmp_path):
    pkg = _toy_pkg(tmp_path / "src")
    (pkg / "cute" / "softmax.py").unlink()
    with pytest.raises(PatchError, match="anchor 'one' needs cute/softmax.py, which does not exist"):
        build_patched_tree(TOY, cache_root=tmp_path / "cache", source_pkg=pkg, source_version="0.toy")


def test_the_private_copy_is_a_regular_package_keyed_by_its_sources(tmp_path):
    cache = tmp_path / "cache"
    tree = build_patched_tree(TOY, cache_root=cache, source_pkg=_toy_pkg(tmp_path / "a"), source_version="0.toy")
    # a regular package (its own __init__.py) shadows the namespace package: the copy never mixes with the install
    assert (tree.root / "flash_attn" / "__init__.py").read_text().startswith("# private softbench copy")
    assert (tree.root / "flash_attn" / "cute" / "softmax.py").read_text() == "x = 2\n"
    # other sources of the same version (one unpatched file differs) get a copy of their own, not this one
    other = build_patched_tree(TOY, cache_root=cache, source_pkg=_toy_pkg(tmp_path / "b", extra="y = 1\n"),
                               source_version="0.toy")
    assert other.root != tree.root
    assert (other.root / "flash_attn" / "cute" / "other.py").read_text() == "y = 1\n"


def test_a_cached_copy_missing_a_file_is_rebuilt(tmp_path):
    pkg = _toy_pkg(tmp_path / "src")
    tree = build_patched_tree(TOY, cache_root=tmp_path / "cache", source_pkg=pkg, source_version="0.toy")
    (tree.root / "flash_attn" / "cute" / "other.py").unlink()
    again = build_patched_tree(TOY, cache_root=tmp_path / "cache", source_pkg=pkg, source_version="0.toy")
    assert (again.root / "flash_attn" / "cute" / "other.py").read_text() == "y = 0\n"


def test_a_copy_that_fails_half_way_leaves_nothing_behind(tmp_path):
    pkg = _toy_pkg(tmp_path / "src")
    (pkg / "data.bin").symlink_to(tmp_path / "nowhere")  # copytree cannot copy a dangling link
    cache = tmp_path / "cache"
    with pytest.raises(shutil.Error):
        build_patched_tree(TOY, cache_root=cache, source_pkg=pkg, source_version="0.toy")
    assert list(cache.iterdir()) == []


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


def _add_shift_only(t):
    """The h15-noclamp kernel operator emulated bit for bit: FP32 add of the folded magic, shift left 22."""
    y = t.to(torch.float32) + torch.tensor(operators.MAGIC_FOLDED, dtype=torch.float32)
    return operators._shl_u32(y.view(torch.int32), operators.SHIFT).view(torch.float32)


def test_noclamp_ptx_is_the_operator_without_its_clamp():
    assert "noclamp" not in P.H15_MODULE  # each patch ships the operators it calls (A1: the clamped one)
    start = P.H15_NOCLAMP_MODULE.index("def h15_from_doubled_noclamp")
    body = P.H15_NOCLAMP_MODULE[start:]
    assert "max.f32" not in body
    assert f"add.rn.f32 sby, $1, {_f32_hex(operators.MAGIC_FOLDED)}" in body
    assert f"shl.b32 sbw, sbb, {operators.SHIFT}" in body


def test_noclamp_equals_rowmax_h15_exactly_where_its_variant_says():
    # every t = 2x on a grid of quarter steps down to the clamp, plus the region where the clamp still acts
    t = torch.arange(-252.0 * 4, 256.0 * 4).float() / 4
    t = t[t < 255.0]
    assert torch.equal(_add_shift_only(t).view(torch.int32),
                       operators.rowmax_h15_from_doubled(t).view(torch.int32))
    # masked scores (-inf) give weight 0 without the clamp (2^-126 with it): both vanish in the row sum
    assert _add_shift_only(torch.tensor([-math.inf])).item() == 0.0
    # below -254.5 the exponent field wraps: the variant is wrong there, which is why it is a control
    below = _add_shift_only(torch.tensor([-253.0, -254.0, -255.0, -260.0, -1000.0]))
    assert below[0].item() == 2.0**-127 and below[1].item() == 0.0  # tiny: no effect on a row sum >= 1
    assert torch.isnan(below[2]) and below[3].item() < -1e37 and below[4].item() == 4096.0  # garbage


@pytest.mark.parametrize("every", [2, 4])
def test_each_fraction_variant_takes_h15_on_one_element_in_its_own_every(every):
    patch = P.FA4_PATCHES.get(f"h15-1of{every}")
    assert patch.name == f"h15-1of{every}"
    sm90 = next(e for e in patch.edits if e.name == "sm90-online-softmax-exp2").replacement
    assert f"sb_c % {every} == {every} - 1" in sm90 and f"1 of {every} elements" in sm90


def test_online_softmax_variants_are_registered_for_the_families_that_run_it():
    # Softmax.online_softmax runs in the sm_90 forward and in the sm_80 one, which sm_120's subclasses; the sm_100
    # forward has its own softmax, so there the edits would leave the stock kernel
    for name in ("h15-noclamp", "h15-1of2", "h15-1of4"):
        assert P.FA4_PATCHES.get(name).arch_families == (8, 9, 12)
    # h15-wg splits by Hopper's MMA warpgroups, which the 4-warp sm_80 forward does not have
    assert P.H15_WG.arch_families == (9,)


def test_an_online_softmax_variant_on_the_b200_is_refused_naming_the_forwards_it_changes(monkeypatch):
    from softbench.core.errors import UnsupportedError
    from softbench.kernels.fa4 import FA4Backend
    from test_capability import B200

    monkeypatch.delitem(sys.modules, "flash_attn", raising=False)  # as in a fresh worker process
    with pytest.raises(UnsupportedError, match=r"^variant h15-1of4 changes only FA4's sm_80, sm_90 and sm_120 "
                                               r"forward; on sm_100 it would silently be the stock kernel$"):
        FA4Backend(target=B200).load("h15-1of4")
    with pytest.raises(UnsupportedError, match=r"^variant h15-wg changes only FA4's sm_90 forward; on sm_100"):
        FA4Backend(target=B200).load("h15-wg")
    wg = next(e for e in P.H15_WG.edits if e.name == "sm90-online-softmax-exp2").replacement
    assert "canonical_warp_group_idx(sync=True) == 1" in wg
    assert "h15_from_doubled(" in wg and "cute.math.exp2(" in wg


@needs_fa4
def test_recorded_sessions_ran_what_the_patches_build_now(tmp_path):
    """Every FA4 worker in the committed sessions recorded the sha256 of each file of its patched copy. A patch at
    the recorded name and version must build exactly those files again (or, for a version whose module text
    changed before this test existed, one of the texts fa4_patches.RECORDED_MODULE_TEXTS lists): a patch whose text
    changes must change its version, or old sessions would silently describe another kernel."""
    import dataclasses
    import json
    from pathlib import Path

    checked, unchecked = 0, []
    for env_path in sorted(Path(__file__).resolve().parents[1].glob("sessions/*/env.json")):
        workers = json.loads(env_path.read_text()).get("workers") or {}
        for w in workers.values():
            rec = w.get("patch") if isinstance(w, dict) else None
            if not rec or w.get("variant") not in P.FA4_PATCHES:
                continue
            patch = P.FA4_PATCHES.get(w["variant"])
            key = (rec["patch"], rec["patch_version"])
            if rec["fa4_version"] != patch.fa4_version or rec["patch"] != patch.name:
                unchecked.append((env_path.parent.name, w["variant"], key))
                continue
            if rec["patch_version"] == patch.version:
                candidates = [patch]
            elif key in P.RECORDED_MODULE_TEXTS:
                candidates = [dataclasses.replace(patch, version=rec["patch_version"], new_files=tuple(
                    dataclasses.replace(f, text=text) for f in patch.new_files)) for text in P.RECORDED_MODULE_TEXTS[key]]
            else:
                unchecked.append((env_path.parent.name, w["variant"], key))
                continue
            built = [build_patched_tree(c, cache_root=tmp_path / str(i)).file_sha256 for i, c in enumerate(candidates)]
            assert rec["file_sha256"] in built, f"{env_path.parent.name}: {patch.name} {rec['patch_version']}"
            checked += 1
    assert checked >= 40  # stock, A1, noexp and every sm_90 variant, in both stops' sessions
    # none is passed over: a variant now built by a patch of another name, or a version bumped without its old
    # module text in RECORDED_MODULE_TEXTS, would leave the sessions recorded under it unverifiable
    assert unchecked == [], unchecked[:5]


def test_sources_that_differ_only_in_a_files_name_get_copies_of_their_own(tmp_path):
    cache = tmp_path / "cache"
    tree = build_patched_tree(TOY, cache_root=cache, source_pkg=_toy_pkg(tmp_path / "a"), source_version="0.toy")
    pkg = _toy_pkg(tmp_path / "b")
    (pkg / "cute" / "other.py").rename(pkg / "cute" / "renamed.py")  # the same bytes under another name
    other = build_patched_tree(TOY, cache_root=cache, source_pkg=pkg, source_version="0.toy")
    assert other.root != tree.root
    assert (other.root / "flash_attn" / "cute" / "renamed.py").exists()
    assert not (other.root / "flash_attn" / "cute" / "other.py").exists()
