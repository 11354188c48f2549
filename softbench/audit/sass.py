"""SASS text as data: pure parsing and counting, no tools run here (softbench.audit.disassembly runs them).

Formats read
- `cuobjdump --dump-sass` (CUDA 12/13): a function starts at a line `Function : <name>`; every instruction is
  a line `/*<hex address>*/   [@[!]P<n>] OPCODE[.MOD...] operands ;   /* <encoding> */`, followed by a line
  holding only the second half of the encoding, which is skipped.
- `nvdisasm` prints the same instruction lines; its functions start at a section label `.text.<name>:`.
- `cuobjdump --dump-resource-usage`: ` Function <name>:` then `REG:168 STACK:0 SHARED:0 LOCAL:0 ...` on the
  same or the next line.

Opcode families group the opcodes that matter for the exponential path (FAMILIES below, first rule wins);
the raw per-opcode counts are kept beside them, so nothing is lost by the grouping."""

from __future__ import annotations

import re
import statistics
from collections import Counter
from dataclasses import dataclass, field

_FUNC_CUOBJDUMP = re.compile(r"^\s*Function\s*:\s*(\S+)\s*$")
_FUNC_NVDISASM = re.compile(r"^\s*\.text\.(\S+?):\s*$")
_INSTR = re.compile(r"^\s*/\*([0-9a-fA-F]{4,})\*/\s+(.*?)\s*;")
_PRED = re.compile(r"^@!?U?P(?:T|\d+)\s+")
_REG = re.compile(r"(?<![A-Za-z0-9_])R(\d+)(?:\.reuse)?(?:\.(64|128))?(?![0-9])")
_RESOURCE_FUNC = re.compile(r"^\s*Function\s+(\S+?)\s*:\s*(.*)$")
_RESOURCE_FIELD = re.compile(r"([A-Z_]+(?:\[\d+\])?)\s*:\s*(\d+)")

# Opcodes whose first operand is not a register they write (stores, branches, barriers, ...).
_NO_DEST = frozenset({
    "STS", "STSM", "STG", "STL", "ST", "RED", "REDG", "REDUX", "ATOMS", "BAR", "BRA", "BRX", "JMP", "CALL",
    "RET", "EXIT", "BSSY", "BSYNC", "WARPSYNC", "SYNCS", "DEPBAR", "MEMBAR", "NOP", "UTMASTG", "UTMALDG",
    "UBLKCP", "UTMAPF", "UTMACCTL", "FENCE", "ERRBAR", "YIELD", "NANOSLEEP", "WARPGROUP", "ARRIVES",
})


@dataclass(frozen=True)
class Instruction:
    address: int
    opcode: str  # with modifiers, e.g. "IMAD.SHL.U32"
    operands: tuple[str, ...]
    predicate: str = ""

    @property
    def base(self) -> str:
        return self.opcode.split(".", 1)[0]

    @property
    def modifiers(self) -> tuple[str, ...]:
        return tuple(self.opcode.split(".")[1:])

    def dest_registers(self) -> frozenset[int]:
        if not self.operands or self.base in _NO_DEST:
            return frozenset()
        return frozenset(_registers(self.operands[0]))

    def source_registers(self) -> frozenset[int]:
        ops = self.operands if self.base in _NO_DEST else self.operands[1:]
        return frozenset(r for op in ops for r in _registers(op))


def _registers(operand: str) -> list[int]:
    regs: list[int] = []
    for m in _REG.finditer(operand):
        n = int(m.group(1))
        width = {"64": 2, "128": 4}.get(m.group(2) or "", 1)
        regs.extend(range(n, n + width))
    return regs


@dataclass
class SassFunction:
    name: str
    instructions: list[Instruction] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.instructions)


def _split_operands(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


def parse_instruction(text: str, address: int = 0) -> Instruction | None:
    """One instruction without its address and trailing ';', e.g. '@!P0 FFMA.FTZ R3, R2, R5, -R4'."""
    t = text.strip().lstrip("{").rstrip("}").strip()
    pred = ""
    m = _PRED.match(t)
    if m:
        pred = m.group(0).strip()
        t = t[m.end():]
    if not t:
        return None
    opcode, _, rest = t.partition(" ")
    return Instruction(address=address, opcode=opcode, operands=_split_operands(rest), predicate=pred)


def parse_sass(text: str) -> list[SassFunction]:
    """Functions of a cuobjdump or nvdisasm dump, in order; instructions outside any function are dropped."""
    functions: list[SassFunction] = []
    current: SassFunction | None = None
    for line in text.splitlines():
        m = _FUNC_CUOBJDUMP.match(line) or _FUNC_NVDISASM.match(line)
        if m:
            current = SassFunction(m.group(1))
            functions.append(current)
            continue
        m = _INSTR.match(line)
        if m and current is not None:
            ins = parse_instruction(m.group(2), int(m.group(1), 16))
            if ins is not None:
                current.instructions.append(ins)
    return functions


def parse_resource_usage(text: str) -> dict[str, dict[str, int]]:
    """`cuobjdump --dump-resource-usage` -> {function: {"REG": 168, "STACK": 0, "SHARED": 0, "LOCAL": 0, ...}}."""
    out: dict[str, dict[str, int]] = {}
    pending: str | None = None
    for line in text.splitlines():
        m = _RESOURCE_FUNC.match(line)
        if m:
            pending = m.group(1)
            fields = dict((k, int(v)) for k, v in _RESOURCE_FIELD.findall(m.group(2)))
            if fields:
                out[pending] = fields
                pending = None
            continue
        if pending is not None:
            fields = dict((k, int(v)) for k, v in _RESOURCE_FIELD.findall(line))
            if fields:
                out[pending] = fields
                pending = None
    return out


# --- opcode families ------------------------------------------------------------------------------------

def _base(*names: str):
    names_set = frozenset(names)
    return lambda i: i.base in names_set


def _base_with(base: str, modifier: str):
    return lambda i: i.base == base and modifier in i.modifiers


def _uniform(i: Instruction) -> bool:
    return i.base.startswith("U") and not i.base.startswith("UTC")


# Hopper's warpgroup MMA as SASS names it by operand type: HGMMA 16-bit floats, QGMMA FP8, IGMMA 8-bit integers,
# BGMMA bits
WGMMA_OPCODES = ("HGMMA", "QGMMA", "IGMMA", "BGMMA")


def _mma(i: Instruction) -> bool:
    return i.base in {*WGMMA_OPCODES, "HMMA", "IMMA", "QMMA", "OMMA"} or (
        i.base.startswith("UTC") and "MMA" in i.base)


# Family names carry no dots, so `sass.<variant>.<family>` is a plain dotted path into summary.json.
FAMILIES: tuple[tuple[str, object], ...] = (
    ("MUFU_EX2", _base_with("MUFU", "EX2")),
    ("MUFU_OTHER", _base("MUFU")),
    ("FFMA", _base("FFMA", "FFMA2")),
    ("FMUL", _base("FMUL", "FMUL2")),
    ("FADD", _base("FADD", "FADD2")),
    ("FMNMX", _base("FMNMX", "FMNMX3")),
    ("FCMP", _base("FSETP", "FSEL", "FSET")),
    ("SHIFT", lambda i: i.base in {"SHF", "SHL", "SHR"} or (i.base == "IMAD" and "SHL" in i.modifiers)),
    ("LEA", _base("LEA")),
    ("MOV", lambda i: i.base == "MOV" or (i.base == "IMAD" and "MOV" in i.modifiers)),
    ("IADD3", _base("IADD3", "IADD", "IADD2")),
    ("IMAD", _base("IMAD", "IMUL")),
    ("LOP3", _base("LOP3", "LOP")),
    ("ISETP", _base("ISETP", "ICMP")),
    ("SEL", _base("SEL")),
    ("CONVERT", _base("F2F", "F2FP", "F2I", "I2F", "I2FP", "F2IP", "FRND")),
    ("MMA", _mma),
    ("LDS", _base("LDS", "LDSM")),
    ("STS", _base("STS", "STSM")),
    ("LDL", _base("LDL")),
    ("STL", _base("STL")),
    ("GMEM", _base("LDG", "STG", "LDGSTS", "LDGDEPBAR", "RED", "REDG", "ATOM", "ATOMG", "UTMALDG", "UTMASTG",
                   "UBLKCP", "UTMAPF")),
    ("SHFL", _base("SHFL")),
    ("SYNC", _base("BAR", "SYNCS", "WARPSYNC", "DEPBAR", "MEMBAR", "ERRBAR", "WARPGROUP", "BSSY", "BSYNC",
                   "NANOSLEEP", "YIELD", "FENCE", "ARRIVES")),
    ("BRANCH", _base("BRA", "BRX", "JMP", "CALL", "RET", "EXIT", "BREAK")),
    ("UNIFORM", _uniform),
    ("NOP", _base("NOP")),
)
FAMILY_NAMES = tuple(name for name, _ in FAMILIES) + ("OTHER",)


def family_of(ins: Instruction) -> str:
    for name, rule in FAMILIES:
        if rule(ins):  # type: ignore[operator]
            return name
    return "OTHER"


def count_families(fn: SassFunction) -> dict[str, int]:
    """Static count per family (every family present, zeros included) plus `total`."""
    c = Counter(family_of(i) for i in fn.instructions)
    out = {name: int(c.get(name, 0)) for name in FAMILY_NAMES}
    out["total"] = len(fn.instructions)
    return out


def count_opcodes(fn: SassFunction) -> dict[str, int]:
    """Raw static count per full opcode (with modifiers), most frequent first."""
    return dict(Counter(i.opcode for i in fn.instructions).most_common())


def pick_kernel(functions: list[SassFunction], pattern: str | None,
                fallback: bool = True) -> tuple[SassFunction | None, str]:
    """The attention kernel: the largest function whose name matches `pattern` (a regular expression), else,
    with `fallback` (a default pattern, which a renamed kernel may no longer match), the largest function of all.
    Returns the function (None where there is none to take) and how it was chosen, or why not."""
    if not functions:
        return None, "no function"
    if pattern:
        rx = re.compile(pattern)
        matching = [f for f in functions if rx.search(f.name)]
        if matching:
            return max(matching, key=len), f"largest of {len(matching)} function(s) matching /{pattern}/"
        if not fallback:
            return None, f"no function matches /{pattern}/"
    return max(functions, key=len), (f"no function matches /{pattern}/; " if pattern else "") + \
        f"largest of {len(functions)} function(s)"


# --- per-element cost of the exponential path -------------------------------------------------------------

# FA4's exp2 emulation on the FMA pipe (sm_100: flash_attn/cute/utils.py ex2_emulation and ex2_emulation_2 in
# 4.0.0b36) starts every emulated pair with one round-down packed add (add.rm.ftz.f32x2: FADD2.RM) and every
# emulated scalar with one round-down add (add.rm.ftz.f32: FADD.RM), to split off the integer part; FA4 rounds
# down nowhere else. So these opcodes count the exponentials that have no MUFU.EX2, with their lane widths.
EMULATED_EX2_OPCODES = {"FADD2.RM": 2, "FADD.RM": 1}

PER_ELEMENT_METHOD = (
    "static: (instructions of V - instructions of the reference) / n, where n = exponentials of A0 - exponentials "
    "of the reference, i.e. the number of element exponentials in the static code (every inlined copy of the "
    "softmax loop body counts once, whatever its trip count); a kernel's exponentials are its MUFU.EX2 plus "
    "those FA4 emulates on the FMA pipe (2 per FADD2.RM, 1 per FADD.RM: the round-down add each emulation "
    "starts with). With noexp as the reference the result is the "
    "cost of the exponential path beyond the shared scale-and-subtract FFMA (A0 near 1: one MUFU.EX2). Without "
    "noexp, A0 is the reference, n counts the exponentials V removed, and the value is A0's cost (assumed one "
    "MUFU.EX2, flagged) plus V's extra instructions per element. Compiler side effects (moves, scheduling, "
    "different unrolling) land in the difference too; the per-family breakdown shows where.")


def exponentials_static(family_counts: dict[str, int], opcodes: dict[str, int] | None) -> int:
    """Element exponentials in a kernel's static code: MUFU.EX2 plus FA4's emulated ones (EMULATED_EX2_OPCODES)."""
    return family_counts["MUFU_EX2"] + sum(w * (opcodes or {}).get(op, 0) for op, w in EMULATED_EX2_OPCODES.items())


def per_element_costs(families: dict[str, dict[str, int]], baseline: str = "A0", reference: str = "noexp",
                      opcodes: dict[str, dict[str, int]] | None = None) -> dict:
    """Per-element instruction cost of each variant's exponential path from static family counts.

    families: {variant: count_families(...)}; opcodes: {variant: count_opcodes(...)}, for the emulated
    exponentials. Returns {"method", "reference", "elements_static", "emulated_static", "per_element":
    {v: float|None}, "by_family": {v: {family: float}}, "notes": [...]}."""
    out: dict = {"method": PER_ELEMENT_METHOD, "per_element": {}, "by_family": {}, "notes": []}
    if baseline not in families:
        out["notes"].append(f"{baseline} was not audited: no per-element estimate")
        out["reference"] = None
        return out
    opcodes = opcodes or {}
    exps = {v: exponentials_static(fam, opcodes.get(v)) for v, fam in families.items()}
    out["emulated_static"] = {v: exps[v] - fam["MUFU_EX2"] for v, fam in families.items()}
    base = families[baseline]
    if reference in families:
        ref = families[reference]
        n = exps[baseline] - exps[reference]
        out.update(reference=reference, elements_static=n)
        if n <= 0:
            out["notes"].append(f"{reference} has no fewer exponentials than {baseline} ({exps[reference]} vs "
                                f"{exps[baseline]}): the element count is unknown")
            return out
        for v, fam in families.items():
            out["per_element"][v] = (fam["total"] - ref["total"]) / n
            out["by_family"][v] = _family_deltas(fam, ref, n)
        return out
    out.update(reference=baseline, assumed_baseline_cost=1.0)
    out["notes"].append(f"no {reference} variant: {baseline}'s path is assumed to cost one MUFU.EX2 per element")
    for v, fam in families.items():
        n = exps[baseline] - exps[v]
        if v == baseline:
            out["per_element"][v] = 1.0
            continue
        if n <= 0:
            out["per_element"][v] = None
            out["notes"].append(f"{v} removes no exponential relative to {baseline}: no element count")
            continue
        out["per_element"][v] = 1.0 + (fam["total"] - base["total"]) / n
        out["by_family"][v] = _family_deltas(fam, base, n)
    return out


def _family_deltas(fam: dict[str, int], ref: dict[str, int], n: int) -> dict[str, float]:
    return {k: (fam[k] - ref[k]) / n for k in FAMILY_NAMES if fam.get(k, 0) != ref.get(k, 0)}


def per_element_dynamic(ncu: dict[str, dict], baseline: str = "A0", reference: str = "noexp") -> dict:
    """The same estimate from executed warp instructions (ncu): (inst(V) - inst(ref)) / (xu(A0) - xu(ref)),
    where xu counts instructions executed on the XU pipe (MUFU). Warp-level counts on both sides, so each
    ratio is per element. Needs A0 and noexp with `instructions` and `xu_instructions`."""
    out: dict = {"per_element": {}, "notes": []}
    need = ("instructions", "xu_instructions")
    if not all(v in ncu and all(ncu[v].get(k) is not None for k in need) for v in (baseline, reference)):
        out["notes"].append(f"needs ncu instruction counts of {baseline} and {reference}")
        return out
    n = ncu[baseline]["xu_instructions"] - ncu[reference]["xu_instructions"]
    if n <= 0:
        out["notes"].append("the XU instruction difference is not positive: no element count")
        return out
    out["elements_warp_level"] = n
    for v, m in ncu.items():
        if m.get("instructions") is not None:
            out["per_element"][v] = (m["instructions"] - ncu[reference]["instructions"]) / n
    return out


# --- dependency depth (heuristic) -----------------------------------------------------------------------

DEPTH_METHOD = (
    "heuristic over the def-use chain in program order: from each sink (MUFU.EX2, or a left shift by 22 that "
    "builds Rowmax-H15's exponent: SHF.L/SHL by 0x16, IMAD.SHL by 0x400000, LEA by 0x16) follow the nearest "
    "earlier writer of one of its source registers until an FFMA (the scale-and-subtract) is reached; depth "
    "is the number of instructions after that FFMA up to and including the sink. Control flow is ignored and "
    "the search looks back at most `window` instructions; chains that never reach an FFMA are counted apart.")


def _is_sink(i: Instruction) -> bool:
    if i.base == "MUFU" and "EX2" in i.modifiers:
        return True
    ops = [o.lower() for o in i.operands]
    if i.base in ("SHF", "SHL") and (i.base == "SHL" or "L" in i.modifiers):
        return "0x16" in ops
    if i.base == "IMAD" and "SHL" in i.modifiers:
        return "0x400000" in ops
    if i.base == "LEA":
        return "0x16" in ops
    return False


def dependency_depth(fn: SassFunction, window: int = 64, max_steps: int = 12) -> dict:
    """Depth of the exponential path per sink (see DEPTH_METHOD): summary over all sinks of the function."""
    ins = fn.instructions
    depths: list[int] = []
    chains: Counter = Counter()
    unresolved = 0
    for k, sink in enumerate(ins):
        if not _is_sink(sink):
            continue
        chain = [sink.opcode]
        cur, pos = sink, k
        found = False
        for _ in range(max_steps):
            srcs = cur.source_registers()
            j = next((j for j in range(pos - 1, max(-1, pos - 1 - window), -1)
                      if ins[j].dest_registers() & srcs), None)
            if j is None:
                break
            if ins[j].base in ("FFMA", "FFMA2"):
                found = True
                chain.append(ins[j].opcode)
                break
            chain.append(ins[j].opcode)
            cur, pos = ins[j], j
        if found:
            depths.append(len(chain) - 1)
            chains[" <- ".join(chain)] += 1
        else:
            unresolved += 1
    out: dict = {"method": DEPTH_METHOD, "sinks": len(depths) + unresolved, "resolved": len(depths),
                 "unresolved": unresolved}
    if depths:
        out.update(median=float(statistics.median(depths)), max=max(depths), min=min(depths),
                   chains=dict(chains.most_common(3)))
    return out
