"""Compile softbench's Triton forward for a GPU that is not here (default sm_90a, Hopper) and say what came out:
registers and local-memory (spill) bytes per thread, shared memory, the matrix instructions, and whether V
reaches shared memory through asynchronous copies (the pipelined path) or through registers.

Triton ships ptxas and cuobjdump, so this runs on a CPU-only machine; it is how the configuration table in
triton_attn was checked without a GPU. It needs the real compiler: run it in a process without TRITON_INTERPRET.

    python -m softbench.kernels.triton_compile fp8 128 A1 [--causal] [--config 64,128,4,3,1] [--tma]
        [--max-registers 128] [--warp-specialize] [--rotate] [--label m128n64w8s2-tma-r128-hg8]

Spills: ptxas reports register spills as STACK bytes (LOCAL stays 0), so stack_bytes and the STL/LDL counts
are what to check. loop_*: one iteration of the steady-state key loop in the SASS."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from softbench.core.errors import UnsupportedError
from softbench.core.shapes import Shape
from softbench.kernels.capability import HOPPER_FAMILY, arch_family

_PTR = {"bf16": "*bf16", "fp16": "*fp16", "fp8": "*fp8e4nv"}


def _int_arg(name: str, value: int, index: int, sig: dict, consts: dict, attrs: dict) -> None:
    """Specialise an integer argument as Triton's launcher does: 1 becomes a constant, multiples of 16 are
    marked divisible by 16 (what lets the compiler vectorise loads)."""
    if value == 1:
        sig[name] = "constexpr"
        consts[name] = 1
        return
    sig[name] = "i32"
    if value % 16 == 0:
        attrs[(index,)] = [["tt.divisibility", 16]]


def _signature(arg_names, typed: dict, ints: dict) -> tuple[dict, dict, dict]:
    """Triton's (signature, constexprs, attrs) for a kernel's arguments: `typed` names the typed ones (pointers
    marked 16-byte aligned, as torch allocations are), `ints` the integers, specialised as the launcher does;
    the rest are compile-time constants, filled in by the caller."""
    sig: dict = {}
    consts: dict = {}
    attrs: dict = {}
    for i, name in enumerate(arg_names):
        if name in typed:
            sig[name] = typed[name]
            if typed[name].startswith("*"):
                attrs[(i,)] = [["tt.divisibility", 16]]
        elif name in ints:
            _int_arg(name, ints[name], i, sig, consts, attrs)
        else:
            sig[name] = "constexpr"
    return sig, consts, attrs


def compile_kernel(shape: Shape, variant: str, config, arch: int = 90):
    """Compile the kernel for `shape` and `config` (softbench.kernels.triton_attn.KernelConfig, or
    gluon_config.GluonConfig for the Gluon kernel) for sm_`arch`; returns Triton's compiled kernel (its .asm holds
    ttgir, ptx and cubin)."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        raise UnsupportedError("cross-compiling needs Triton's compiler; unset TRITON_INTERPRET for this process")
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from softbench.kernels import triton_attn as ta

    if not isinstance(config, ta.KernelConfig):
        return _compile_gluon(shape, variant, config, arch)

    s, h, hk, d = shape.seq, shape.heads, shape.n_kv_heads, shape.head_dim
    # strides exactly as prepare_operands lays the tensors out
    if config.v_kmajor:
        v_strides = (hk * d * s, 1, d * s, s)  # (batch, seq, head, dim) of the (b, hk, d, s) copy
    else:
        v_strides = (s * hk * d, hk * d, d, 1)
    ints = dict(seq=s, heads=h, group=h // hk, kn_blocks=ta.key_norm_blocks(s),
                head_group=ta.effective_head_group(config, shape.batch * h),
                stride_qb=s * h * d, stride_qs=h * d, stride_qh=d,
                stride_kb=s * hk * d, stride_ks=hk * d, stride_kh=d,
                stride_vb=v_strides[0], stride_vs=v_strides[1], stride_vh=v_strides[2], stride_vd=v_strides[3],
                stride_ob=s * h * d, stride_os=h * d, stride_oh=d)
    out_ptr = "*bf16" if shape.dtype == "fp8" else _PTR[shape.dtype]
    # TMA: the boxes prepare_operands' descriptors use (triton_attn._descriptors)
    boxes = {"Q": [1, config.block_m, d], "K": [1, config.block_n, d], "O": [1, config.block_m, d],
             "V": [1, d, config.block_n] if config.v_kmajor else [1, config.block_n, d]}
    typed = {"qk_scale": "fp32", "v_scale": "fp32", "KN": "*fp32"}  # KN: h15-proved's key norms; unread otherwise
    for name, box in boxes.items():
        ptr = out_ptr if name == "O" else _PTR[shape.dtype]
        typed[name] = f"tensordesc<{ptr[1:]}[{','.join(map(str, box))}]>" if config.tma else ptr
    sig, consts, attrs = _signature(ta._attn_fwd.arg_names, typed, ints)
    consts.update(ta.kernel_constants(config, s, d, shape.causal, shape.dtype == "fp8", variant))
    compiled = triton.compile(ASTSource(fn=ta._attn_fwd, signature=sig, constexprs=consts, attrs=attrs),
                              target=GPUTarget("cuda", arch, 32),
                              options={"num_warps": config.num_warps, "num_stages": config.num_stages,
                                       **ta.launch_options(config)})
    return compiled


def _compile_gluon(shape: Shape, variant: str, config, arch: int):
    """compile_kernel for the Gluon kernel: descriptor arguments typed as its launch passes them (the boxes and
    shared layouts gluon_attn.prepare_operands makes), integers specialised as Triton's launcher does."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    from softbench.kernels import gluon_attn as ga
    from softbench.kernels.gluon_config import check_head_dim
    from softbench.kernels.inputs import TORCH_DTYPES

    d, fp8 = shape.head_dim, shape.dtype == "fp8"
    check_head_dim(d)  # as its launch refuses head dim 256, which the Triton-language kernel takes
    dtypes = {"q": shape.dtype, "k": shape.dtype, "v": shape.dtype, "o": "bf16" if fp8 else shape.dtype,
              "ones": shape.dtype}

    def desc(name: str, box: list) -> str:
        layout = ga.shared_layout(box, TORCH_DTYPES[dtypes[name]])
        return f"tensordesc<{_PTR[dtypes[name]][1:]}[{','.join(map(str, box))}],{layout!r}>"

    descs = {f"desc_{name}": desc(name, box) for name, box in ga.boxes(config, d, fp8).items()}
    ints = dict(seq=shape.seq, heads=shape.heads, group=shape.heads // shape.n_kv_heads,
                head_group=ga.effective_head_group(config, shape.batch * shape.heads),
                kn_blocks=ga.key_norm_blocks(shape.seq),
                n_items=ga.query_blocks(config, shape.batch, shape.heads, shape.seq))
    typed = {**descs, "KN": "*fp32", "counter": "*i32", "qk_scale": "fp32", "v_scale": "fp32"}
    sig, consts, attrs = _signature(ga._attn_fwd_ws.arg_names, typed, ints)
    consts.update(ga.kernel_constants(config, shape.seq, d, shape.causal, fp8, variant))
    if config.sync == "mbarrier":
        ga._ready_ptx_trim()
    return triton.compile(GluonASTSource(fn=ga._attn_fwd_ws, signature=sig, constexprs=consts, attrs=attrs),
                          target=GPUTarget("cuda", arch, 32), options=ga.launch_options(config, variant))


def audit_compile(shape: Shape, variant: str, options: dict, arch: int, dump_dir: Path) -> dict:
    """`softbench audit --backend triton --arch sm_90a` in its child: the configuration the backend would run on
    that GPU (the backend's options on the defaults of an sm_90 machine: the Gluon kernel where it applies), compiled
    here, its cubin written into dump_dir for the audit's SASS step. Returns the configuration and the key loop's
    instruction mix (_sass_summary)."""
    from softbench.kernels.inputs import TORCH_DTYPES
    from softbench.kernels.triton_backend import kernel_of, resolve_config

    config = resolve_config(TORCH_DTYPES[shape.dtype], shape.head_dim, options,
                            hopper=arch_family(arch) == HOPPER_FAMILY)
    compiled = compile_kernel(shape, variant, config, arch)
    cubin = compiled.asm["cubin"]
    (dump_dir / f"{compiled.name}.sm_{arch}a.cubin").write_bytes(cubin)
    return {"kernel": kernel_of(config), "config": config.label(), "loop": _sass_summary(cubin)}


def cross_compile(shape: Shape, variant: str, config, arch: int = 90) -> dict:
    """Compile as compile_kernel does and report the resources and instruction mix."""
    compiled = compile_kernel(shape, variant, config, arch)
    ptx, ttgir = compiled.asm["ptx"], compiled.asm["ttgir"]
    report = {
        "arch": f"sm_{arch}", "config": config.label(), "variant": variant, "shape": shape.tag(),
        "shared_bytes": int(compiled.metadata.shared),
        "wgmma": sorted(set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(\S+?)\s", ptx))),
        "mma": sorted(set(re.findall(r"\bmma\.sync\.aligned\.(\S+?)\s", ptx))),
        "ex2_instructions": len(re.findall(r"\bex2\.approx", ptx)),
        # V copied global -> shared asynchronously (pipelined) rather than stored from registers each tile
        "v_async_copy": bool(re.search(r"%v\w*\s*=\s*ttg\.async_copy_global_to_local", ttgir)),
        "v_through_registers": bool(re.search(r"ttg\.local_alloc %v\w* :", ttgir)),
        "tma_loads": len(re.findall(r"async_tma_copy_global_to_local", ttgir)),  # KernelConfig.tma: Q, K, V
        "warp_specialized": "ttg.warp_specialize" in ttgir,
        # -gdc: launched with programmatic dependent launch, and how many waits for the grid before it the PTX holds
        "launch_pdl": bool(getattr(compiled.metadata, "launch_pdl", False)),
        "grid_dependency_waits": len(re.findall(r"\bgriddepcontrol\.wait\b", ptx)),
        # atomics on global memory (the dynamic schedule's block counter), each as "<op> predicated|every thread":
        # a counter taken by every thread of a warp rather than by one would hand each a different block
        "global_atomics": [f"{op} {'predicated' if pred else 'every thread'}"
                           for pred, op in re.findall(r"^\s*(@%p\w+\s+)?atom\.global\.(\S+)\s", ptx, re.M)],
    }
    report.update(_resource_usage(compiled.asm["cubin"]))
    report.update(_sass_summary(compiled.asm["cubin"]))
    report.update(ptx_loop_schedule(ptx))
    report["ptxas_advisories"] = _ptxas_advisories(ptx, arch)
    return report


_F32_OP = re.compile(r"^\s*(?:@\S+\s+)?(?:ex2|max|min|fma|mul|add|sub)(?:\.\w+)*\.f32\b")


def ptx_loop_schedule(ptx: str) -> dict:
    """Where the key loop's wgmma groups are waited for, read from the PTX (before ptxas schedules it): the loop
    is the shortest span from a label back to a branch to it that holds a wgmma. For each commit group in loop
    order: its wgmma count and shape, whether A comes from shared memory (Q.K^T) or registers (P.V, rotate's
    hand-over), and how many FP32 arithmetic instructions (the softmax: ex2, max, fma, ...) run between its
    commit and the wait_group that retires it, following the back edge. qk_wait_deferred: some Q.K^T group has
    softmax work in flight; False when every Q.K^T issue is waited for at once."""
    lines = ptx.splitlines()
    labels = {m.group(1): i for i, ln in enumerate(lines) if (m := re.match(r"^(\$L__BB\w+):", ln))}
    body = None
    for i, ln in enumerate(lines):
        m = re.search(r"\bbra(?:\.uni)?\s+(\$L__BB\w+);", ln)
        if m and labels.get(m.group(1), i) < i:
            span = lines[labels[m.group(1)]:i + 1]
            if any("wgmma.mma_async" in x for x in span) and (body is None or len(span) < len(body)):
                body = span
    if body is None:
        return {}
    events: list = []  # ("mma", shape, a_in_registers) | ("commit",) | ("wait", n) | ("f32",)
    for ln in body:
        if m := re.search(r"wgmma\.mma_async\.sync\.aligned\.(\S+?)\s+\{[^}]*\},\s*(\S)", ln):
            events.append(("mma", m.group(1), m.group(2) == "{"))
        elif "wgmma.commit_group" in ln:
            events.append(("commit",))
        elif m := re.search(r"wgmma\.wait_group\.sync\.aligned\s+(\d+)", ln):
            events.append(("wait", int(m.group(1))))
        elif _F32_OP.match(ln):
            events.append(("f32",))
    groups, pending = [], []
    for k, e in enumerate(events):
        if e[0] == "mma":
            pending.append(e)
        elif e[0] == "commit" and pending:
            groups.append({"at": k, "wgmma": len(pending), "shape": pending[0][1],
                           "a": "registers" if pending[0][2] else "shared"})
            pending = []
    n = len(events)
    for g in groups:
        after, f32 = 0, 0
        for step in range(1, 2 * n):  # twice round the loop: the retiring wait may lie past the back edge
            e = events[(g["at"] + step) % n]
            if e[0] == "commit":
                after += 1
            elif e[0] == "f32":
                f32 += 1
            elif e[0] == "wait" and after >= e[1]:  # at most e[1] newer groups may stay pending: g is done
                break
        g["f32_ops_in_flight"] = f32
        del g["at"]
    return {"ptx_loop_groups": groups,
            "qk_wait_deferred": any(g["a"] == "shared" and g["f32_ops_in_flight"] > 0 for g in groups)}


def _ptxas_advisories(ptx: str, arch: int) -> list[str]:
    """ptxas's performance notes (e.g. C7514: wgmma serialized), which Triton's own ptxas run does not show."""
    tool = _bundled_tool("ptxas")
    if tool is None:
        return []
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "kernel.ptx"
        src.write_text(ptx)
        target = f"sm_{arch}a" if arch >= 90 else f"sm_{arch}"  # Triton compiles Hopper as sm_90a
        r = subprocess.run([str(tool), f"-arch={target}", "-v", str(src), "-o", str(Path(tmp) / "k.cubin")],
                           capture_output=True, text=True)
    return [re.sub(r"\s+", " ", ln.split(":", 1)[1]).strip() for ln in (r.stdout + r.stderr).splitlines()
            if re.search(r"\(C7\d+\)", ln)]


def bundled_tool_dir() -> str | None:
    """The folder of the CUDA tools the triton wheel bundles (<triton>/backends/nvidia/bin: ptxas, cuobjdump and
    nvdisasm, release 12.8 with triton 3.6, which read sm_90a and sm_100a cubins), or None without triton. Found
    without importing triton. The audit looks there too (softbench.audit.tools), last."""
    import importlib.util

    spec = importlib.util.find_spec("triton")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        d = Path(loc) / "backends" / "nvidia" / "bin"
        if d.is_dir():
            return str(d)
    return None


def _bundled_tool(name: str) -> Path | None:
    """One of the CUDA tools Triton ships (ptxas, cuobjdump), or None where this Triton lacks it."""
    d = bundled_tool_dir()
    tool = Path(d) / name if d else None
    return tool if tool is not None and tool.exists() else None


def _cuobjdump(cubin: bytes, flag: str) -> str:
    """cuobjdump's output for `flag` on the compiled kernel; empty if the tool is missing."""
    tool = _bundled_tool("cuobjdump")
    if tool is None:
        return ""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        return subprocess.run([str(tool), flag, str(path)], capture_output=True, text=True, check=True).stdout


def _sass(cubin: bytes) -> str:
    return _cuobjdump(cubin, "-sass")


def _branch_target(ins) -> int | None:
    """The address an instruction names as an operand (a branch's target), None where it names none."""
    return next((int(o, 16) for o in ins.operands if re.fullmatch(r"0x[0-9a-f]+", o)), None)


def main_loop(instructions: list) -> list | None:
    """The instructions (softbench.audit.sass.Instruction) of the steady-state key loop: the shortest backward
    branch whose body holds a matrix instruction, among branches before the last EXIT (after it lie the cold retry
    paths of mbarrier waits, which jump back into the loop and would otherwise look like loops themselves)."""
    exits = [i.address for i in instructions if i.base == "EXIT"]
    if not exits:
        return None
    best = None
    for br in instructions:
        target = _branch_target(br)
        if br.base != "BRA" or target is None or br.address >= exits[-1] or target > br.address:
            continue
        body = [i for i in instructions if target <= i.address <= br.address]
        if any("GMMA" in i.opcode for i in body) and (best is None or len(body) < len(best)):
            best = body
    return best


def _sass_summary(cubin: bytes) -> dict:
    """Spill traffic in the whole kernel and the instruction mix of one iteration of the key loop."""
    from softbench.audit.sass import parse_sass

    functions = parse_sass(_sass(cubin))
    if not functions:
        return {}
    kernel = functions[0].instructions  # one function in a Triton cubin: the kernel
    body = main_loop(kernel) or []

    def count(ins, match) -> int:
        return sum(1 for i in ins if match(i))

    return {"spill_stores": count(kernel, lambda i: i.base == "STL"),
            "spill_loads": count(kernel, lambda i: i.base == "LDL"),
            "loop_instructions": len(body), "loop_mufu_ex2": count(body, lambda i: i.opcode.startswith("MUFU.EX2")),
            # one per HGMMA when ptxas serialized them
            "loop_gmma_waits": count(body, lambda i: i.opcode.startswith("WARPGROUP.DEPBAR")),
            "loop_gmma": count(body, lambda i: "GMMA" in i.opcode),
            "loop_bar_sync": count(body, lambda i: i.opcode.startswith("BAR.SYNC")),
            # ordinary shared-memory loads and stores (not wgmma's, not TMA's): none in the Gluon kernel's loop,
            # which is what lets -tb drop the loop's barriers (softbench.kernels.ptx_trim)
            "loop_shared_ld_st": count(body, lambda i: i.base in ("LDS", "STS", "LDSM", "STSM")),
            "loop_fmnmx": count(body, lambda i: i.base == "FMNMX"), "loop_fadd": count(body, lambda i: i.base == "FADD"),
            "loop_shift": count(body, lambda i: i.base == "SHF" or i.opcode.startswith("IMAD.SHL")),
            # exchanges inside a quad: two per row for its maximum, two more for its sum unless kept per thread (-lt)
            "loop_shfl": count(body, lambda i: i.base == "SHFL"),
            # byte moves and conversions: what P's FP8 operand costs (one PRMT per two F2FP when packed well)
            "loop_prmt": count(body, lambda i: i.base == "PRMT"), "loop_f2fp": count(body, lambda i: i.base == "F2FP"),
            "loop_ffma_sat": count(body, lambda i: i.opcode.startswith("FFMA.SAT")),
            "loop_ffma": count(body, lambda i: i.base == "FFMA"),
            "loop_vote": count(body, lambda i: i.base == "VOTE"),
            # selects: the mask's, one per score of a masked tile (triton_attn._kept), and a few per row
            "loop_fsel": count(body, lambda i: i.base == "FSEL"),
            "loop_fmul_jumped": _jumped_fmuls(body),
            # FMULs issued between the loop's first and last wgmma: O's rescale beside Q.K^T in flight (-ro)
            "loop_fmul_among_gmma": _fmuls_among_gmma(body),
            # exponentials ptxas placed after the loop's last wgmma wait (P.V's): where that wait sits among them
            # (GluonConfig.tile_loops: without the mask's branch in the loop, ptxas hoists it above most of them)
            "loop_mufu_after_last_wait": _after_last_wait(body, "MUFU.EX2"),
            # P's conversions to its 16-bit operand after that wait: between it and the next Q.K^T's issue
            # (GluonConfig.p_round "wgmma" moves them to P.V's issue)
            "loop_f2fp_after_last_wait": _after_last_wait(body, "F2FP"),
            "loop_max_chain": _longest_chain(body, "FMNMX"),
            # the row sums' adds, one after another: what ptxas leaves at the tile's end (-lt, -ltt shorten it)
            "loop_sum_chain": _longest_chain(body, "FADD"),
            "named_barriers": _named_barriers(kernel),
            # O's TMA stores issued while a wgmma group is in flight: the deferred epilogue (-pde) writes a block's O
            # under the next block's first Q.K^T; every other schedule after its last P.V's wait
            "o_stores_under_gmma": _stores_under_gmma(kernel),
            # wgmma waits that leave one group in flight, in the whole kernel: the key loop's (Q.K^T waited for
            # while P.V runs), and under -pdo also each block's first tile's, whose Q.K^T is waited for while the
            # block before's last P.V runs
            "gmma_waits_leaving_one": count(kernel, lambda i: i.opcode.startswith("WARPGROUP.DEPBAR")
                                            and i.operands[-1:] == ("0x1", ))}


def _stores_under_gmma(kernel: list) -> int:
    """UTMASTG (a TMA store from shared to global memory) between a wgmma (HGMMA) and the next WARPGROUP.DEPBAR, in
    the kernel's static order."""
    in_flight, stores = False, 0
    for i in kernel:
        if "GMMA" in i.opcode:
            in_flight = True
        elif i.opcode.startswith("WARPGROUP.DEPBAR"):
            in_flight = False
        elif i.base == "UTMASTG" and in_flight:
            stores += 1
    return stores


def _fmuls_among_gmma(body: list) -> int:
    """FMUL instructions after the loop's first wgmma and before its last (0 without wgmma)."""
    at = [n for n, i in enumerate(body) if "GMMA" in i.opcode]
    return sum(1 for i in body[at[0] + 1:at[-1]] if i.base == "FMUL") if at else 0


def _after_last_wait(body: list, opcode: str) -> int:
    """Instructions whose opcode starts with `opcode` after the loop's last WARPGROUP.DEPBAR (all of them without
    one)."""
    at = [n for n, i in enumerate(body) if i.opcode.startswith("WARPGROUP.DEPBAR")]
    return sum(1 for i in body[at[-1] + 1 if at else 0:] if i.opcode.startswith(opcode))


def _longest_chain(body: list, base: str) -> int:
    """The most instructions of one kind (`base`: FMNMX, FADD) one after another in a chain of dependences in the
    loop. FMNMX: the latency of each row's maximum, which every exponential of the tile waits for; FADD: that of
    its sum. The reduction's shuffles across threads do not break a chain: each is followed by an instruction of
    the same kind that combines the thread's own partial result with the shuffled one, which carries the chain on.
    A register that anything else writes starts a new chain, and so does every branch (the loop's masked and
    unmasked tile forms are alternatives, whose registers the count must not join)."""
    depth: dict[int, int] = {}
    longest = 0
    for ins in body:
        written = ins.dest_registers()
        if ins.base == "BRA":
            depth.clear()
        elif ins.base == base:
            d = max((depth.get(r, 0) for r in ins.source_registers()), default=0) + 1
            for r in written:
                depth[r] = d
            longest = max(longest, d)
        else:
            for r in written:
                depth.pop(r, None)
    return longest


def _jumped_fmuls(body: list) -> int:
    """FMULs of the loop that a predicated forward branch inside the loop can jump over: O's rescale where the
    Gluon kernel skips it (GluonConfig.rescale "moved"), 0 where every tile multiplies."""
    jumped = 0
    for br in body:
        target = _branch_target(br)
        if br.base != "BRA" or not br.predicate or target is None or target <= br.address:
            continue
        span = [i for i in body if br.address < i.address < target]
        if span and all(i.base == "FMUL" for i in span):
            jumped += len(span)
    return jumped


def _named_barriers(kernel: list) -> dict:
    """Every named-barrier instruction of the kernel by kind, id and thread count ("sync 12/256", "arrive 13/256";
    "sync 1/all" without a count), with how often it occurs: Triton's own barriers and the ping-pong's hand-over."""
    found: dict[str, int] = {}
    for i in kernel:
        kind = "sync" if i.opcode.startswith("BAR.SYNC") else "arrive" if i.opcode.startswith("BAR.ARV") else None
        ids = [int(o, 16) for o in i.operands if re.fullmatch(r"0x[0-9a-f]+", o)] if kind else []
        if not ids:
            continue
        key = f"{kind} {ids[0]}/{ids[1] if len(ids) > 1 else 'all'}"
        found[key] = found.get(key, 0) + 1
    return dict(sorted(found.items()))


def _resource_usage(cubin: bytes) -> dict:
    """Registers and local memory per thread from cuobjdump (bundled with Triton); empty if it is missing."""
    from softbench.audit.sass import parse_resource_usage

    # one function in a Triton cubin: the kernel
    found = next(iter(parse_resource_usage(_cuobjdump(cubin, "--dump-resource-usage")).values()), {})
    return {"registers": found["REG"], "local_bytes": found.get("LOCAL", 0),
            "stack_bytes": found.get("STACK", 0)} if "REG" in found else {}


def main(argv: list[str]) -> int:
    import argparse
    import json
    from dataclasses import replace

    from softbench.kernels.inputs import TORCH_DTYPES
    from softbench.kernels.triton_attn import KernelConfig, default_config

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dtype", choices=sorted(_PTR))
    p.add_argument("head_dim", type=int)
    p.add_argument("variant")
    p.add_argument("--seq", type=int, default=8192)
    p.add_argument("--causal", action="store_true")
    p.add_argument("--arch", type=int, default=90)
    p.add_argument("--config", help="block_m,block_n,num_warps,num_stages[,v_kmajor 0/1] (default: the table's)")
    p.add_argument("--tma", action="store_true", help="tensor descriptors (KernelConfig.tma)")
    p.add_argument("--warp-specialize", action="store_true", help="KernelConfig.warp_specialize")
    p.add_argument("--max-registers", type=int, default=None, help="KernelConfig.max_registers (maxnreg)")
    p.add_argument("--rotate", action="store_true", help="KernelConfig.rotate (Q.K^T of the next tile first)")
    p.add_argument("--label", help="a whole configuration by its label, e.g. m128n64w8s2-tma-r128-hg8 or "
                   "gluon-n128s2-c240l24-hg8 (the Gluon kernel) (instead of --config and the flags)")
    a = p.parse_args(argv)
    label = (a.label or "").strip()  # a label pasted with a space must still pick the Gluon kernel's parser
    shape = Shape(dtype=a.dtype, seq=a.seq, causal=a.causal, head_dim=a.head_dim)
    if label.startswith("gluon"):
        from softbench.kernels.gluon_config import GluonConfig

        print(json.dumps(cross_compile(shape, a.variant, GluonConfig.from_label(label), a.arch), indent=1))
        return 0
    if label:
        config = KernelConfig.from_label(label)
    elif a.config:
        parts = [int(x) for x in a.config.split(",")]
        config = KernelConfig(*parts[:4], v_kmajor=bool(parts[4]) if len(parts) > 4 else a.dtype == "fp8")
    else:
        config = default_config(TORCH_DTYPES[a.dtype], a.head_dim)
    flags = {"tma": a.tma, "warp_specialize": a.warp_specialize, "rotate": a.rotate}
    config = replace(config, **{k: True for k, v in flags.items() if v})
    if a.max_registers is not None:
        config = replace(config, max_registers=a.max_registers)
    print(json.dumps(cross_compile(shape, a.variant, config, a.arch), indent=1))
    return 0


def run(argv: list[str]) -> int:
    """main, with softbench's convention for what goes wrong: one line on stderr and the error's exit code."""
    from softbench.cli import print_error
    from softbench.core.errors import SoftbenchError

    try:
        return main(argv)
    except SoftbenchError as e:
        return print_error(str(e), e.hint, e.exit_code)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
