"""-tb (softbench.kernels.ptx_trim): the warpgroup barriers Triton 3.6 puts before the Gluon kernel's mbarrier waits
and releases, taken out of its PTX. Checked on the PTX Triton compiles for sm_90a here (no GPU needed): exactly
those barriers go, nothing else changes, the rewrite refuses PTX it was not written for, and only marked kernels
are touched. That the kernel still computes the same output bit for bit is checked on the H200
(tools/gpu/gluon_probe.py --repeat-equal)."""

import difflib
import os
import subprocess
import sys

import pytest

pytest.importorskip("triton")
pytest.importorskip("triton.experimental.gluon.language.nvidia.hopper")

from softbench.core.errors import UnsupportedError  # noqa: E402
from softbench.kernels import ptx_trim  # noqa: E402

FP8_ONE_CONSUMER = "gluon-n128s2-c240l24-hg8-g1"
BF16_TWO_CONSUMERS = "gluon-n128s2-c240l24-hg8"


def _ptx(tmp_path, dtype: str, label: str, variant: str = "A0") -> str:
    """The PTX of the kernel compiled for sm_90a in a process of its own (without TRITON_INTERPRET, which other
    test modules set)."""
    out = tmp_path / f"{dtype}-{label}-{variant}.ptx"
    code = ("import sys; from softbench.core.shapes import Shape; from softbench.kernels.triton_compile import "
            "compile_kernel; from softbench.kernels.gluon_config import GluonConfig; "
            f"c = compile_kernel(Shape(dtype={dtype!r}, seq=8192, causal=True, head_dim=128), {variant!r}, "
            f"GluonConfig.from_label({label!r})); open(sys.argv[1], 'w').write(c.asm['ptx'])")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return out.read_text()


@pytest.fixture(scope="module")
def plain_fp8(tmp_path_factory):
    return _ptx(tmp_path_factory.mktemp("ptx"), "fp8", FP8_ONE_CONSUMER)


def _removed_lines(before: str, after: str) -> list[str]:
    diff = list(difflib.ndiff(before.split("\n"), after.split("\n")))
    assert not [d for d in diff if d.startswith("+ ")], "the rewrite only removes lines"
    return [d[2:] for d in diff if d.startswith("- ")]


def test_only_the_barriers_before_mbarrier_waits_and_releases_go(plain_fp8):
    trimmed, n = ptx_trim.trim(plain_fp8)
    removed = _removed_lines(plain_fp8, trimmed)
    assert len(removed) == n > 0
    # Triton 3.6.0's PTX of this kernel has 7 of them: 3 before a wait (try_wait.parity) and 4 before a release, a
    # plain arrive one thread issues under a predicate (@%p8 mbarrier.arrive...); a barrier whose next instruction
    # is anything else stays
    assert n == 7
    assert all(ptx_trim._PARTITION_SYNC.match(line) for line in removed), removed
    # the key loop's three per tile (K ready, K released, V released) are among them: what is left of the
    # partition barriers guards ordinary shared-memory accesses (the output tile, mbarrier.init)
    left = [i for i, line in enumerate(trimmed.split("\n")) if ptx_trim._PARTITION_SYNC.match(line)]
    assert left, "the barriers that order ordinary shared-memory accesses stay"
    lines = trimmed.split("\n")
    for i in left:
        assert not ptx_trim._guarded_op(lines, i)
    # every release is a plain arrive and every wait a try_wait loop: the producer's arrive.expect_tx is not one
    assert trimmed.count("mbarrier.arrive.expect_tx") == plain_fp8.count("mbarrier.arrive.expect_tx") > 0


def test_a_kernel_without_such_barriers_is_refused(plain_fp8):
    trimmed, _ = ptx_trim.trim(plain_fp8)
    with pytest.raises(UnsupportedError, match="found no warpgroup barrier"):
        ptx_trim.trim(trimmed)
    with pytest.raises(UnsupportedError, match="found no warpgroup barrier"):
        ptx_trim.trim(plain_fp8.replace("mbarrier.try_wait.parity", "mbarrier.test_wait.parity")
                      .replace("mbarrier.arrive.shared::cta.b64", "mbarrier.arrive.release.shared::cta.b64"))


def test_a_barrier_that_orders_a_shared_memory_access_stays_and_one_left_behind_is_refused(plain_fp8):
    lines = plain_fp8.split("\n")
    first = next(i for i in range(len(lines)) if ptx_trim._guarded_op(lines, i))
    _, n = ptx_trim.trim(plain_fp8)
    # an ordinary shared-memory load between the barrier and the wait: the barrier orders it, so it stays
    loaded = lines[:first + 1] + ["\tld.shared.u32 \t%r9999, [%r91];"] + lines[first + 1:]
    assert ptx_trim.trim("\n".join(loaded))[1] == n - 1
    # two barriers in a row before the wait: removing the second would leave the first before it, so the PTX is
    # not the one the rewrite was written for
    doubled = lines[:first + 1] + lines[first:]
    with pytest.raises(UnsupportedError, match="left a warpgroup barrier"):
        ptx_trim.trim("\n".join(doubled))


def test_unmarked_kernels_pass_untouched(plain_fp8):
    assert ptx_trim.MARKER not in plain_fp8
    assert ptx_trim.trim_if_marked(plain_fp8) == plain_fp8


def test_the_marked_kernel_is_compiled_from_trimmed_ptx(tmp_path, plain_fp8):
    """-tb: the mark (with this rewrite's digest) in the PTX, and the PTX is the plain kernel's with the barriers
    removed: the same instructions in the same order, up to the register moves (the mark's own, and where the
    compiler puts a constant)."""
    marked = _ptx(tmp_path, "fp8", FP8_ONE_CONSUMER + "-tb")
    assert ptx_trim.MARK in marked
    expected, _ = ptx_trim.trim(plain_fp8)

    def instructions(text: str) -> list[str]:
        # the code only: the DWARF sections after it describe source lines and variables, and their bytes move
        # with the kernel's constant arguments (the mark's is one) without any instruction changing
        code = text.split("\t.section\t.debug", 1)[0]
        return [ln.split()[0] for ln in code.split("\n") if ln.strip()
                and not ln.strip().startswith(("//", ".loc", ".file")) and not ln.strip().startswith("mov.")]

    assert instructions(marked) == instructions(expected)
    lines = marked.split("\n")
    assert not any(ptx_trim._guarded_op(lines, i) for i in range(len(lines)))


def test_pinned_to_triton_3_6():
    ptx_trim.check_triton("3.6.0")
    ptx_trim.check_triton("3.6")
    for other in ("3.7.0", "3.5.1", "3.60.0"):
        with pytest.raises(UnsupportedError, match="rewrites Triton 3.6"):
            ptx_trim.check_triton(other)


def test_hook_chains_the_one_before_and_is_installed_once(monkeypatch):
    from triton import knobs

    seen = []

    def earlier(backend, stages, options, language, capability):
        seen.append("earlier")
        stages["ptx"] = lambda src, metadata: src + "\n// earlier"

    monkeypatch.setattr(knobs.runtime, "add_stages_inspection_hook", earlier)
    ptx_trim.install()
    ptx_trim.install()
    hook = knobs.runtime.add_stages_inspection_hook
    assert hook is not earlier and hook.softbench_ptx_trim
    stages = {"ptx": lambda src, metadata: src}
    hook(None, stages, None, None, 90)
    assert seen == ["earlier"]
    assert stages["ptx"]("plain", {}) == "plain\n// earlier"  # an unmarked kernel: as the earlier hook made it
    with pytest.raises(UnsupportedError, match="found no warpgroup barrier"):
        stages["ptx"](f"// {ptx_trim.MARK}", {})  # a marked one that is not the kernel: refused
