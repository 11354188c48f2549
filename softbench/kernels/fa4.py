"""FA4 (flash-attn-4, module flash_attn.cute) as a backend: stock and patched variants, each imported from its
own private copy of the sources (softbench.kernels.patch). One process per variant: FA4 reads its settings
when it builds a kernel, and a process can hold only one `flash_attn` package."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

from softbench.core.errors import PatchError, UnsupportedError
from softbench.core.wording import listed
from softbench.kernels.capability import Device, detect_device, fa4_unsupported_reason
from softbench.kernels.fa4_patches import FA4_PATCHES
from softbench.kernels.patch import build_patched_tree
from softbench.kernels.inputs import Inputs
from softbench.core.shapes import Shape


def dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


class FA4Backend:
    name = "fa4"

    def __init__(self, patch_cache: str | None = None, target: Device | None = None):
        # target: the GPU to compile for instead of the visible one (a cross-compile, which runs nothing: the
        # audit's --arch sm_100a); the variant's tree, its checks and its forward call stay those of a GPU run
        self.device = target or detect_device()
        self.patch_cache = patch_cache
        self.fa = None

    def load(self, variant: str) -> dict:
        if self.device.kind != "cuda":
            raise UnsupportedError("--backend fa4 needs a CUDA GPU and none is visible here",
                                   hint="use --backend sim, the pure-torch simulation of the same kernels")
        if "flash_attn" in sys.modules:
            raise PatchError("flash_attn is already imported in this process; each variant needs its own process")
        # FA4's exp2-emulation settings (emu-f8-s1) exist by name only: the check registers a setting in this
        # process's patch registry on first use, so that every caller (a timing worker, the audit's child) loads
        # one as it loads a named variant. Imported here: the emulation patch is the sweep's (sweep.emulation)
        from softbench.sweep.emulation import ensure_registered

        ensure_registered(variant)  # check("fa4", variant) first: an unknown name gets the closest ones
        patch = FA4_PATCHES.get(variant)
        family = self.device.family
        if patch.arch_families is not None and family not in patch.arch_families:
            kernels = listed([f"sm_{changed}0" for changed in patch.arch_families])
            raise UnsupportedError(f"variant {variant} changes only FA4's {kernels} forward; on "
                                   f"{self.device.arch_label} it would silently be the stock kernel")
        tree = build_patched_tree(patch, cache_root=Path(self.patch_cache) if self.patch_cache else None)
        sys.path.insert(0, str(tree.root))
        import flash_attn.cute as fa  # noqa: E402  (import from the private tree, on purpose)

        if not Path(fa.__file__).resolve().is_relative_to(tree.root.resolve()):
            raise PatchError(f"flash_attn.cute was imported from {fa.__file__}, not from the private tree {tree.root}")
        self.fa = fa
        return {
            "backend": "fa4",
            "variant": variant,
            "arch": self.device.arch,
            "patch": tree.to_dict(),
            "versions": {n: dist_version(n) for n in ("flash-attn-4", "nvidia-cutlass-dsl", "quack-kernels",
                                                      "apache-tvm-ffi")},
        }

    def build(self, shape: Shape, inputs: Inputs):
        reason = fa4_unsupported_reason(shape, self.device)
        if reason:
            raise UnsupportedError(reason)
        fa = self.fa

        def forward():
            out, _lse = fa.flash_attn_func(inputs.q, inputs.k, inputs.v, causal=shape.causal)
            return out

        return forward
