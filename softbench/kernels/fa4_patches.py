"""The FA4 source patches: stock (a verbatim private copy), Rowmax-H15 (A1) and the no-exponential control.

Anchors are exact texts of flash-attn-4 4.0.0b36. sm_90 (and sm_80) compute the exponential in
`Softmax.online_softmax` (two exp2 calls); sm_100 in `SoftmaxSm100.scale_subtract_rowmax` followed by
`apply_exp2_convert`, called from `flash_fwd_sm100.py`. For sm_100 the patch adds separate methods with doubled
exponential-path constants (2*scale_log2, 2*max_offset) and switches the call sites to them, so the shared
constants (rescale, row sum, log-sum-exp, FP8 range check) stay as they are (paper B.1). MLA kernels are not
patched."""

from __future__ import annotations

from softbench.kernels.capability import HOPPER_FAMILY
from softbench.kernels.patch import Edit, NewFile, Patch
from softbench.core.registry import Registry


def _asm_operator(name: str, registers: tuple[str, ...], body: tuple[str, ...]) -> str:
    """One element operator of the patch module: a CuTe DSL function around an inline PTX block that takes t in
    $1 and returns the weight in $0 (each line below becomes one PTX statement)."""
    lines = "".join(f'            "{line};\\n\\t"\n' for line in (*registers, *body))
    return (
        "\n\n@dsl_user_op\n"
        f"def {name}(t: Float32, *, loc=None, ip=None) -> Float32:\n"
        "    return Float32(\n"
        "        llvm.inline_asm(\n"
        "            T.f32(),\n"
        "            [Float32(t).ir_value(loc=loc, ip=ip)],\n"
        '            "{\\n\\t"\n'
        f"{lines}"
        '            "}\\n",\n'
        '            "=f,f",\n'
        "            has_side_effects=False,\n"
        "            is_align_stack=False,\n"
        "            asm_dialect=llvm.AsmDialect.AD_ATT,\n"
        "        )\n"
        "    )\n"
    )


# The element-wise operator as inline PTX. t = 2x arrives already doubled.
#   max.f32  c, t, -252.0          clamp: keeps the exponent field >= 1 (0fC37C0000 = -252.0)
#   add.rn.f32 y, c, 12583166.0    2^23 + 2^22 + 254 (0f4B4000FE): rounds t to n (RNE) and adds the bias 2*127
#   shl.b32  w, bits(y), 22        n's bit 0 -> leading mantissa bit, the rest -> exponent field
_ADD_SHIFT = ("mov.b32 sbb, sby", "shl.b32 sbw, sbb, 22", "mov.b32 $0, sbw")
_H15 = _asm_operator("h15_from_doubled", (".reg .f32 sbc, sby", ".reg .b32 sbb, sbw"),
                     ("max.f32 sbc, $1, 0fC37C0000", "add.rn.f32 sby, sbc, 0f4B4000FE", *_ADD_SHIFT))
# the timing control without the clamp (variant h15-noclamp)
_H15_NOCLAMP = _asm_operator("h15_from_doubled_noclamp", (".reg .f32 sby", ".reg .b32 sbb, sbw"),
                             ("add.rn.f32 sby, $1, 0f4B4000FE", *_ADD_SHIFT))
_MODULE_HEAD = (
    '"""softbench: Rowmax-H15 element operator (added by the softbench rowmax-h15 patch)."""\n'
    "from cutlass import Float32\n"
    "from cutlass.cutlass_dsl import T, dsl_user_op\n"
    "from cutlass._mlir.dialects import llvm\n"
)
H15_MODULE = _MODULE_HEAD + _H15
H15_NOCLAMP_MODULE = _MODULE_HEAD + _H15 + _H15_NOCLAMP

# What sessions recorded under a patch version whose module text later changed. Version 1 of rowmax-h15, h15-1of2
# and h15-1of4 shipped H15_MODULE until 2026-11-30 about 14:00 UTC, then H15_NOCLAMP_MODULE in the sessions of
# 14:30-14:38 (the added function is never called by them: the A1 cubin is byte-identical, audit sessions
# 20261130T121009Z and 20261130T143826Z). Version 2 ships H15_MODULE under a version of its own.
RECORDED_MODULE_TEXTS = {(name, "1"): (H15_MODULE, H15_NOCLAMP_MODULE)
                         for name in ("rowmax-h15", "h15-1of2", "h15-1of4")}

_IMPORT_ANCHOR = "import flash_attn.cute.utils as utils\n"
_IMPORT_REPL = _IMPORT_ANCHOR + "import flash_attn.cute.softbench_h15 as softbench_h15\n"

# sm_80/sm_90: both exp2 sites of Softmax.online_softmax (first block and later blocks)
_SM90_EXP2 = (
    "                acc_S_row_exp = cute.math.exp2(\n"
    "                    acc_S_row * scale_log2 - row_max_cur_scaled, fastmath=True\n"
    "                )\n"
)
_SM90_H15 = (
    "                # softbench rowmax-h15: t = 2x with doubled constants (exact), then clamp/add/shift\n"
    "                acc_S_mn[r, None].store(acc_S_row * (scale_log2 * 2.0) - row_max_cur_scaled * 2.0)\n"
    "                for sb_c in cutlass.range_constexpr(cute.size(acc_S_mn, mode=[1])):\n"
    "                    acc_S_mn[r, sb_c] = softbench_h15.h15_from_doubled(acc_S_mn[r, sb_c])\n"
    "                acc_S_row_exp = acc_S_mn[r, None].load()\n"
)
_SM90_NOEXP = (
    "                # softbench noexp control: exponential removed (wrong results on purpose)\n"
    "                acc_S_row_exp = acc_S_row * scale_log2 - row_max_cur_scaled\n"
)

# sm_100: new methods beside the stock ones
_SM100_METHOD_ANCHOR = "    @cute.jit\n    def scale_apply_exp2_convert(\n"
_SM100_H15_METHODS = '''    @cute.jit
    def scale_subtract_rowmax_h15(
        self,
        acc_S_row: cute.Tensor,
        row_max: Float32,
    ):
        # softbench rowmax-h15: the exponential path's own doubled constants (2*scale_log2, 2*max_offset);
        # doubling is exact, so each element is exactly twice the stock exp2 input
        assert cute.size(acc_S_row.shape) % 2 == 0, "acc_S_row must have an even number of elements"
        scale_log2_x2 = self.scale_log2 * 2.0
        bias_x2 = (Float32(self.max_offset) - row_max * self.scale_log2) * 2.0
        for i in cutlass.range(0, cute.size(acc_S_row.shape), 2, unroll_full=True):
            acc_S_row[i], acc_S_row[i + 1] = cute.arch.fma_packed_f32x2(
                (acc_S_row[i], acc_S_row[i + 1]),
                (scale_log2_x2, scale_log2_x2),
                (bias_x2, bias_x2),
            )

    @cute.jit
    def apply_h15_convert(
        self,
        acc_S_row: cute.Tensor,
        acc_S_row_converted: cute.Tensor,
        ex2_emu_freq: cutlass.Constexpr[int] = 0,
        ex2_emu_res: cutlass.Constexpr[int] = 4,
        ex2_emu_start_frg: cutlass.Constexpr[int] = 0,
    ):
        # softbench rowmax-h15 on every element; FA4's emulation settings have no meaning here
        frg_tile = 32
        frg_cnt = cute.size(acc_S_row) // frg_tile
        assert cute.size(acc_S_row) % frg_tile == 0
        acc_S_row_frg = cute.logical_divide(acc_S_row, cute.make_layout(frg_tile))
        acc_S_row_converted_frg = cute.logical_divide(
            acc_S_row_converted, cute.make_layout(frg_tile)
        )
        for j in cutlass.range_constexpr(frg_cnt):
            for k in cutlass.range_constexpr(cute.size(acc_S_row_frg, mode=[0])):
                acc_S_row_frg[k, j] = softbench_h15.h15_from_doubled(acc_S_row_frg[k, j])
            acc_S_row_converted_frg[None, j].store(
                acc_S_row_frg[None, j].load().to(acc_S_row_converted.element_type)
            )

'''
_SM100_NOEXP_METHODS = '''    @cute.jit
    def apply_noexp_convert(
        self,
        acc_S_row: cute.Tensor,
        acc_S_row_converted: cute.Tensor,
        ex2_emu_freq: cutlass.Constexpr[int] = 0,
        ex2_emu_res: cutlass.Constexpr[int] = 4,
        ex2_emu_start_frg: cutlass.Constexpr[int] = 0,
    ):
        # softbench noexp control: convert the exponent itself (wrong results on purpose)
        acc_S_row_converted.store(acc_S_row.load().to(acc_S_row_converted.element_type))

'''
_SM100_SUB_CALL = "        softmax.scale_subtract_rowmax(tSrS_t2r, row_max)\n"
_SM100_EXP_CALL = "        softmax.apply_exp2_convert(\n            tSrS_t2r,\n            tSrP_r2t,\n"


def _sm100_call(method: str) -> str:
    return f"        softmax.{method}(\n            tSrS_t2r,\n            tSrP_r2t,\n"


STOCK = Patch("stock", "1", "verbatim private copy of the installed FA4 (A0)")

ROWMAX_H15 = Patch(
    "rowmax-h15", "2", "Rowmax-H15 in the exponential path (sm_90 online_softmax; sm_100 apply_exp2_convert path)",
    edits=(
        Edit("softmax-import", "cute/softmax.py", _IMPORT_ANCHOR, _IMPORT_REPL),
        Edit("sm90-online-softmax-exp2", "cute/softmax.py", _SM90_EXP2, _SM90_H15, count=2),
        Edit("sm100-softmax-methods", "cute/softmax.py", _SM100_METHOD_ANCHOR, _SM100_H15_METHODS + _SM100_METHOD_ANCHOR),
        Edit("sm100-scale-subtract-call", "cute/flash_fwd_sm100.py", _SM100_SUB_CALL,
             "        softmax.scale_subtract_rowmax_h15(tSrS_t2r, row_max)\n"),
        Edit("sm100-exp2-convert-call", "cute/flash_fwd_sm100.py", _SM100_EXP_CALL, _sm100_call("apply_h15_convert")),
    ),
    new_files=(NewFile("cute/softbench_h15.py", H15_MODULE),),
)

NOEXP = Patch(
    "noexp", "1", "exponential removed in the same places (timing ceiling; wrong results on purpose)",
    edits=(
        Edit("sm90-online-softmax-exp2", "cute/softmax.py", _SM90_EXP2, _SM90_NOEXP, count=2),
        Edit("sm100-softmax-methods", "cute/softmax.py", _SM100_METHOD_ANCHOR, _SM100_NOEXP_METHODS + _SM100_METHOD_ANCHOR),
        Edit("sm100-exp2-convert-call", "cute/flash_fwd_sm100.py", _SM100_EXP_CALL, _sm100_call("apply_noexp_convert")),
    ),
)


def _sm90_fraction_h15(every: int) -> str:
    """Rowmax-H15 on one element in `every` (the last of each group of columns a thread holds), the hardware
    exponential on the others: balances the ALU/FMA pipes against MUFU instead of moving all work to them."""
    return (
        f"                # softbench h15 on 1 of {every} elements, hardware exp2 on the rest (scores still raw here)\n"
        "                for sb_c in cutlass.range_constexpr(cute.size(acc_S_mn, mode=[1])):\n"
        f"                    if cutlass.const_expr(sb_c % {every} == {every} - 1):\n"
        "                        acc_S_mn[r, sb_c] = softbench_h15.h15_from_doubled(\n"
        "                            acc_S_mn[r, sb_c] * (scale_log2 * 2.0) - row_max_cur_scaled * 2.0\n"
        "                        )\n"
        "                    else:\n"
        "                        acc_S_mn[r, sb_c] = cute.math.exp2(\n"
        "                            acc_S_mn[r, sb_c] * scale_log2 - row_max_cur_scaled, fastmath=True\n"
        "                        )\n"
        "                acc_S_row_exp = acc_S_mn[r, None].load()\n"
    )


def _online_softmax_patch(name: str, version: str, description: str, replacement: str, module: str,
                          arch_families: tuple[int, ...]) -> Patch:
    """A variant that replaces only the two exp2 sites of Softmax.online_softmax (sm_80/sm_90 code) and adds the
    operator module; refused on the other architectures, where it would silently be the stock kernel."""
    return Patch(
        name, version, description,
        edits=(
            Edit("softmax-import", "cute/softmax.py", _IMPORT_ANCHOR, _IMPORT_REPL),
            Edit("sm90-online-softmax-exp2", "cute/softmax.py", _SM90_EXP2, replacement, count=2),
        ),
        new_files=(NewFile("cute/softbench_h15.py", module),),
        arch_families=arch_families,
    )


# The families whose forward runs Softmax.online_softmax: sm_90's kernel and the sm_80 kernel, which sm_120's
# subclasses. An edit of that method alone changes all three; one that also needs Hopper's warpgroups only sm_90.
ONLINE_SOFTMAX_FAMILIES = (8, 9, 12)


def fraction_patch(every: int) -> Patch:
    return _online_softmax_patch(
        f"h15-1of{every}", "2", f"sm_80/90/120 online softmax: Rowmax-H15 on 1 of {every} elements, hardware exp2 "
        "on the rest", _sm90_fraction_h15(every), H15_MODULE, ONLINE_SOFTMAX_FAMILIES)


_SM90_H15_NOCLAMP = (
    "                # softbench h15-noclamp: add and shift only; exact where every 2x >= -252 (see the variant)\n"
    "                acc_S_mn[r, None].store(acc_S_row * (scale_log2 * 2.0) - row_max_cur_scaled * 2.0)\n"
    "                for sb_c in cutlass.range_constexpr(cute.size(acc_S_mn, mode=[1])):\n"
    "                    acc_S_mn[r, sb_c] = softbench_h15.h15_from_doubled_noclamp(acc_S_mn[r, sb_c])\n"
    "                acc_S_row_exp = acc_S_mn[r, None].load()\n"
)

# The first MMA warpgroup (canonical index 1; 0 is the producer) takes Rowmax-H15, the second the hardware exp2.
# FA4's sm_90 forward alternates the two warpgroups (scheduler barriers): while one runs its softmax the other
# issues matrix instructions, so each SM sub-partition holds one warp of each and their pipes can overlap.
_SM90_H15_WG = (
    "                # softbench h15-wg: Rowmax-H15 in MMA warpgroup 1, hardware exp2 in warpgroup 2\n"
    "                if utils.canonical_warp_group_idx(sync=True) == 1:\n"
    "                    for sb_c in cutlass.range_constexpr(cute.size(acc_S_mn, mode=[1])):\n"
    "                        acc_S_mn[r, sb_c] = softbench_h15.h15_from_doubled(\n"
    "                            acc_S_mn[r, sb_c] * (scale_log2 * 2.0) - row_max_cur_scaled * 2.0\n"
    "                        )\n"
    "                else:\n"
    "                    for sb_c in cutlass.range_constexpr(cute.size(acc_S_mn, mode=[1])):\n"
    "                        acc_S_mn[r, sb_c] = cute.math.exp2(\n"
    "                            acc_S_mn[r, sb_c] * scale_log2 - row_max_cur_scaled, fastmath=True\n"
    "                        )\n"
    "                acc_S_row_exp = acc_S_mn[r, None].load()\n"
)


H15_NOCLAMP = _online_softmax_patch(
    "h15-noclamp", "1", "sm_80/90/120 online softmax: Rowmax-H15 without the clamp (add and shift), exact where "
    "every 2x >= -252", _SM90_H15_NOCLAMP, H15_NOCLAMP_MODULE, ONLINE_SOFTMAX_FAMILIES)
H15_WG = _online_softmax_patch(
    "h15-wg", "1", "sm_90 only: Rowmax-H15 in the first MMA warpgroup, hardware exp2 in the second", _SM90_H15_WG,
    H15_NOCLAMP_MODULE, (HOPPER_FAMILY,))

# which patch builds each variant the catalog lists for the FA4 backend (tests/test_catalog.py holds them equal);
# emulation settings are added by name at run time (softbench.sweep.emulation.ensure_registered)
FA4_PATCHES: Registry[Patch] = Registry("FA4 patch")
FA4_PATCHES.register("A0", STOCK)
FA4_PATCHES.register("A1", ROWMAX_H15)
FA4_PATCHES.register("noexp", NOEXP)
FA4_PATCHES.register("h15-1of2", fraction_patch(2))
FA4_PATCHES.register("h15-1of4", fraction_patch(4))
FA4_PATCHES.register("h15-noclamp", H15_NOCLAMP)
FA4_PATCHES.register("h15-wg", H15_WG)
