"""The warpgroup barriers before the Gluon kernel's mbarrier waits and releases, taken out of its PTX (GluonConfig
`sync="mbarrier"`, label suffix -tb).

Why: Triton 3.6's shared-memory barrier analysis (Membar) treats an mbarrier operation as an ordinary access to
the word it lives in, and puts a partition-wide `bar.sync <id>, 128` in front of every wait on a ready barrier and
every release of an empty one in the consumer's key loop: three per tile (K ready, K released, V released), each
bringing the warpgroup's four warps into lockstep. None of them orders anything the kernel needs:
- a wait (`mbarrier.try_wait.parity` in a loop) is done by every thread for itself;
- a release is one thread's `mbarrier.arrive` after its `wgmma.wait_group`, and a wgmma is one operation of the
  whole warpgroup: once it has completed for that thread it has read its shared-memory operands for all four warps.
  CUTLASS's TMA pipeline releases a stage the same way (one signalling thread per warpgroup, no barrier), and so
  does FlashAttention-3's key loop, which has no barrier inside a warpgroup.
A barrier also orders every ordinary shared-memory access before it against every one after it, so removing it is
safe only where no such pair depends on it: the consumer's key loop has no ordinary shared-memory load or store
(checked on the SASS, `loop_shared_ld_st`), and the accesses before and after the loop (the key-norm prologue of
h15-proved and h15-folded, the epilogue's layout conversion and output tile) lie on either side of wgmma
operations, which complete for one warp only once all four warps of the warpgroup have issued them; the epilogue's
store into Q's buffer keeps its own barrier. The H200 checks every -tb output bit for bit against the kernel with
the barriers (tools/gpu/gluon_probe.py --repeat-equal).
Gluon 3.6 has no operation that leaves them out, so this module rewrites the PTX between Triton's `ptx` and `cubin`
stages (Triton's `knobs.runtime.add_stages_inspection_hook`). Only kernels that carry MARKER are touched (the Gluon
kernel emits it as a PTX comment when asked to, with this file's digest: a constant of the kernel, and so part of
its compile key, so that a cached cubin is always the one this rewrite makes). Fail closed: a marked kernel in
which no such barrier is found, or one is left, is refused (the PTX is not the one this rewrite was written
against), and the rewrite is pinned to Triton 3.6."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from softbench.core.errors import UnsupportedError

MARKER = "softbench: mbarrier-only consumer sync"
# what the kernel writes into its PTX: the marker and this file's digest. Triton's compile cache is keyed by the
# kernel's source and constants, not by this rewrite, so the digest (a constant of the kernel) makes an edit here
# a new key instead of a cached cubin from the rewrite as it was
MARK = f"{MARKER} (ptx_trim {hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]})"
PINNED_TRITON = "3.6"  # the PTX text below was read from Triton 3.6.0's output
# what a refusal suggests, whether -tb was named or came with the defaults
NO_TRIM_HINT = ("name a configuration without -tb in --triton-config, e.g. gluon-n128s2-c240l24-hg8-rl-ltt "
                "(FP8: gluon-n128s2-c240l24-hg8-g1-rla-lmt)")

# a partition's own barrier: Triton gives the default partition id 0 and each further one its own id, with the
# partition's thread count (one warpgroup here)
_PARTITION_SYNC = re.compile(r"^\s*bar\.sync\s+\d+,\s*128;\s*$")
# what may stand between that barrier and the mbarrier instruction: blank lines, comments, the braces and the
# predicate declaration and label of Triton's wait loop, and instructions on registers alone (the address or the
# phase of the mbarrier being computed; where the compiler places them varies from kernel to kernel)
_FILLER = re.compile(r"^\s*(?://.*|\{|\.reg\s+\.pred\s+\w+;|\w+:|\.loc\s.*"
                     r"|(?:@!?%\w+\s+)?(?:mov|add|sub|mad|mul|shl|shr|bfe|and|or|xor|not|setp|selp|cvt)\.[\w.]+\s.*)?\s*$")
# a release (one thread's plain arrive: not the producer's arrive.expect_tx) or a wait
_MBARRIER_OP = re.compile(r"^\s*(?:@%?\w+\s+)?mbarrier\.(?:arrive\.shared::cta\.b64|try_wait\.parity)\b")


def _guarded_op(lines: list[str], i: int) -> bool:
    """True when line i is a partition barrier whose next instruction is an mbarrier wait or release."""
    if not _PARTITION_SYNC.match(lines[i]):
        return False
    for line in lines[i + 1:]:
        if _FILLER.match(line):
            continue
        return bool(_MBARRIER_OP.match(line))
    return False


def trim(ptx: str) -> tuple[str, int]:
    """The PTX with every partition barrier that guards only an mbarrier wait or release removed, and how many
    were removed. Refuses where there were none, or where one is left (both: not the PTX this was written for)."""
    lines = ptx.split("\n")
    drop = {i for i in range(len(lines)) if _guarded_op(lines, i)}
    if not drop:
        raise UnsupportedError("the Gluon kernel's -tb option found no warpgroup barrier before an mbarrier wait "
                               "or release in the compiled PTX, which is not the Triton 3.6 output it was written "
                               "against", hint=NO_TRIM_HINT)
    kept = [line for i, line in enumerate(lines) if i not in drop]
    if any(_guarded_op(kept, i) for i in range(len(kept))):
        raise UnsupportedError("the Gluon kernel's -tb option left a warpgroup barrier before an mbarrier wait or "
                               "release in the compiled PTX", hint=NO_TRIM_HINT)
    return "\n".join(kept), len(drop)


def trim_if_marked(ptx: str) -> str:
    """What the ptx stage hands on: marked kernels trimmed, every other kernel as it is."""
    if MARKER not in ptx:
        return ptx
    return trim(ptx)[0]


def supported(version: str) -> bool:
    """Whether this rewrite was written for Triton `version` (the PTX of another Triton is refused, and the Gluon
    kernel's default leaves -tb out there)."""
    return version == PINNED_TRITON or version.startswith(PINNED_TRITON + ".")


def check_triton(version: str) -> None:
    if not supported(version):
        raise UnsupportedError(f"the Gluon kernel's -tb option rewrites Triton {PINNED_TRITON}'s PTX; this is "
                               f"Triton {version}", hint=NO_TRIM_HINT)


def _stages_hook(previous):
    def hook(backend, stages, options, language, capability):
        if previous is not None:
            previous(backend, stages, options, language, capability)
        make_ptx = stages.get("ptx")
        if make_ptx is not None:
            stages["ptx"] = lambda src, metadata: trim_if_marked(make_ptx(src, metadata))

    hook.softbench_ptx_trim = True
    return hook


def install() -> None:
    """Put the rewrite between Triton's ptx and cubin stages of every compile in this process (once; a hook that
    was there before runs first)."""
    from triton import knobs

    current = knobs.runtime.add_stages_inspection_hook
    if getattr(current, "softbench_ptx_trim", False):
        return
    knobs.runtime.add_stages_inspection_hook = _stages_hook(current)
