"""FA4's own exp2 emulation on sm_100: which elements leave the hardware exponential (beta), the sweep's settings
and protocol, and the source patch that forces one setting into a private copy of FA4.

FA4's `SoftmaxSm100.apply_exp2_convert` walks each thread's row of the S tile in fragments of 32 elements
(j = 0..frg_cnt-1) and, inside a fragment, in pairs (k = 0, 2, ..., 30). A pair uses the hardware exp2 (MUFU)
iff `k % freq < freq - res or j >= frg_cnt - 1 or j < start_frg`; otherwise it uses the cubic polynomial
(`utils.ex2_emulation_2`). freq 0 means hardware everywhere. beta is the emulated share of the pairs (each pair
is two elements, so it is also the share of elements).

The sweep forces (freq, start_frg[, res]) right after `flash_fwd_sm100.py` decides them from its tuning table,
so every setting is the stock kernel with only those constants changed."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from fractions import Fraction
from pathlib import Path

from softbench.core.errors import UsageError
from softbench.core.options import refuse_repeats
from softbench.kernels.capability import SM100_FAMILIES
from softbench.kernels.catalog import EMULATION_NAME, check
from softbench.kernels.patch import Edit, Patch
from softbench.core.protocol import LatencyProtocol, latency_protocol_from_mapping, load_yaml_mapping
from softbench.core.shapes import Shape, shape_from_mapping
from softbench.core.numbers import finite

FRAGMENT = 32  # elements per fragment in apply_exp2_convert (frg_tile)
DEFAULT_RES = 4  # apply_exp2_convert's default ex2_emu_res; flash_fwd_sm100.py never passes another value
DEFAULT_COLUMNS = 128  # S-tile columns one softmax thread holds at head dim 128 (n-block 128): 4 fragments

# shipped inside the package (softbench/protocols), so that an installed wheel finds it too
PAPER_PROTOCOL = "emulation-sweep-paper"


def hardware_exp2(k: int, j: int, freq: int, start_frg: int, res: int = DEFAULT_RES,
                  frg_cnt: int = DEFAULT_COLUMNS // FRAGMENT) -> bool:
    """FA4's predicate, written as in its source: True where the pair (k, k+1) of fragment j uses MUFU ex2."""
    if freq == 0:
        return True
    return k % freq < freq - res or j >= frg_cnt - 1 or j < start_frg


@dataclass(frozen=True)
class EmulationSetting:
    freq: int
    start_frg: int
    res: int = DEFAULT_RES
    columns: int = DEFAULT_COLUMNS
    label: str = ""
    stock: bool = False  # the setting stock FA4 picks for this shape: running it patched is a null check
    paper_beta_pct: float | None = None  # the value the paper prints, kept to compare against, never used

    def __post_init__(self):
        for name in ("freq", "start_frg", "res"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise UsageError(f"emulation setting: {name} must be a non-negative integer, got {v!r}")
        if not isinstance(self.columns, int) or self.columns < FRAGMENT or self.columns % FRAGMENT:
            raise UsageError(f"emulation setting: columns must be a positive multiple of {FRAGMENT}, got {self.columns!r}")
        # label and paper_beta_pct come straight from YAML and are only printed later (sweep/render.py), where a
        # number label or a text percentage would fail far from the file that holds it
        if not isinstance(self.label, str):
            raise UsageError(f"emulation setting: label must be text, got {self.label!r}")
        if not isinstance(self.stock, bool):
            raise UsageError(f"emulation setting: stock must be true or false, got {self.stock!r}")
        p = self.paper_beta_pct
        if p is not None and finite(p) is None:
            raise UsageError(f"emulation setting: paper_beta_pct must be a number (a percentage), got {p!r}")

    @property
    def frg_cnt(self) -> int:
        return self.columns // FRAGMENT

    @property
    def beta(self) -> Fraction:
        """Emulated share of the (k, j) pairs, exact."""
        pairs = [(k, j) for j in range(self.frg_cnt) for k in range(0, FRAGMENT, 2)]
        emulated = sum(not hardware_exp2(k, j, self.freq, self.start_frg, self.res, self.frg_cnt) for k, j in pairs)
        return Fraction(emulated, len(pairs))

    @property
    def beta_pct(self) -> float:
        return float(self.beta * 100)

    @property
    def variant(self) -> str:
        """The kernel-variant name: the FA4 patch registered under it forces exactly this setting."""
        name = f"emu-f{self.freq}-s{self.start_frg}"
        return name if self.res == DEFAULT_RES else f"{name}-r{self.res}"

    def describe(self) -> str:
        if self.label:
            return self.label
        if self.freq == 0:
            return "freq 0 (hardware exp2 only)"
        res = "" if self.res == DEFAULT_RES else f", res {self.res}"
        return f"freq {self.freq}, start {self.start_frg}{res}" + (" (stock)" if self.stock else "")

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(variant=self.variant, beta_pct=self.beta_pct, beta_fraction=str(self.beta), description=self.describe())
        return d


def parse_variant(name: str) -> EmulationSetting | None:
    """`emu-f8-s1` (res 4) or `emu-f8-s1-r2` -> the setting; None for any other name."""
    m = EMULATION_NAME.match(name)
    if not m:
        return None
    freq, start, res = m.groups()
    return EmulationSetting(int(freq), int(start), DEFAULT_RES if res is None else int(res))


# --- the source patch --------------------------------------------------------------------------------------
# flash_fwd_sm100.py (4.0.0b36) decides the two settings here, in the host-side __call__ that builds the kernel
_SETTINGS_BLOCK = (
    "        self.ex2_emu_freq = 0\n"
    '        self.ex2_emu_start_frg = self._tune.get("ex2_emu_start_frg", 1)\n'
    "        if const_expr(self.enable_ex2_emu):\n"
    '            self.ex2_emu_freq = self._tune.get("ex2_emu_freq", 16)\n'
    "            if const_expr(\n"
    "                self.pack_gqa and self.head_dim_padded > 64 and not self.is_causal and not self.is_local\n"
    "            ):\n"
    "                self.ex2_emu_freq = 32 if mCuSeqlensQ is not None or mSeqUsedQ is not None"
    ' else self._tune.get("ex2_emu_freq", 10)\n'
)
# the one call that consumes them; res is left at apply_exp2_convert's default unless a setting changes it
_CALL_ARG = "            ex2_emu_start_frg=self.ex2_emu_start_frg,\n"


def emulation_patch(setting: EmulationSetting) -> Patch:
    forced = (
        f"        # softbench emulation sweep: setting forced after the tuning table (freq {setting.freq}, "
        f"start_frg {setting.start_frg})\n"
        f"        self.ex2_emu_freq = {setting.freq}\n"
        f"        self.ex2_emu_start_frg = {setting.start_frg}\n"
    )
    edits = [Edit("sm100-ex2-emu-settings", "cute/flash_fwd_sm100.py", _SETTINGS_BLOCK, _SETTINGS_BLOCK + forced)]
    if setting.res != DEFAULT_RES:
        edits.append(Edit("sm100-ex2-emu-res", "cute/flash_fwd_sm100.py", _CALL_ARG,
                          _CALL_ARG + f"            ex2_emu_res={setting.res},\n"))
    # the edits are in the sm_100 forward only: elsewhere the variant would silently be the stock kernel under an
    # emulation name, so FA4Backend.load refuses it there
    return Patch(setting.variant, "1", f"stock FA4 with exp2 emulation forced to {setting.describe()} "
                 f"(beta {setting.beta_pct:g}%)", edits=tuple(edits), arch_families=SM100_FAMILIES)


def ensure_registered(name: str) -> dict:
    """Make `name` a variant of the FA4 backend in this process. Emulation names are registered on first use
    (FA4_PATCHES lives per process, so each worker calls this before it loads the variant)."""
    from softbench.kernels.fa4_patches import FA4_PATCHES

    check("fa4", name)  # an unknown name is answered with the closest ones, another backend's with its builders
    setting = parse_variant(name)
    if name not in FA4_PATCHES:
        FA4_PATCHES.register(name, emulation_patch(setting))
    info = {"variant": name, "patch": FA4_PATCHES.get(name).name}
    if setting is not None:
        info["setting"] = setting.to_dict()
    return info


def check_patch_applies(setting: EmulationSetting) -> str | None:
    """None when the setting's patch applies to the installed FA4 sources; else the reason (not installed, or
    the anchors do not match). Pure text work: nothing is built or imported."""
    from softbench.core.errors import PatchError, UnsupportedError
    from softbench.kernels.patch import apply_edits, installed_fa4

    patch = emulation_patch(setting)
    try:
        pkg, version = installed_fa4()
    except UnsupportedError as e:
        return str(e)
    if version != patch.fa4_version:
        return f"installed flash-attn-4 is {version}; the patch is written for {patch.fa4_version}"
    names = {e.file for e in patch.edits}
    try:
        apply_edits({n: (pkg / n).read_text(encoding="utf-8") for n in names}, patch)
    except PatchError as e:
        return str(e)
    return None


# --- the sweep protocol -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EmulationSweep:
    shape: Shape
    protocol: LatencyProtocol
    settings: tuple[EmulationSetting, ...]
    baseline: str = "A0"
    also_compare: tuple[str, ...] = ()
    name: str = ""
    source: str = ""
    notes: str = ""
    raw: dict = field(default_factory=dict)

    def variants(self) -> list[str]:
        return [s.variant for s in self.settings] + list(self.also_compare)


def load_sweep(path: Path | str) -> EmulationSweep:
    data = load_yaml_mapping(path)
    known = {"name", "notes", "shape", "protocol", "baseline", "also_compare", "res", "columns", "settings"}
    unknown = set(data) - known
    if unknown:
        raise UsageError(f"{path}: unknown keys {sorted(unknown)} (known: {sorted(known)})")
    shape = shape_from_mapping(data.get("shape") or {}, f"{path}: shape")
    protocol = latency_protocol_from_mapping({"protocol": data.get("protocol") or {}}, str(path))
    res = data.get("res", DEFAULT_RES)
    columns = data.get("columns", DEFAULT_COLUMNS)
    rows = data.get("settings")
    if not isinstance(rows, list) or not rows:
        raise UsageError(f"{path}: 'settings' must be a non-empty list of {{freq, start_frg}} mappings")
    settings = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise UsageError(f"{path}: settings[{i}] must be a mapping")
        # an empty label would print as a blank row name; leaving the key out gives the generated description
        if "label" in row and not (isinstance(row["label"], str) and row["label"].strip()):
            raise UsageError(f"{path}: settings[{i}]: label must be non-empty text, got {row['label']!r}")
        try:
            settings.append(EmulationSetting(**{"res": res, "columns": columns, **row}))
        except TypeError as e:
            raise UsageError(f"{path}: settings[{i}]: {e}") from None
        except UsageError as e:
            raise UsageError(f"{path}: settings[{i}]: {str(e).removeprefix('emulation setting: ')}",
                             hint=e.hint) from None
    # the names are checked here, as `sweep variants` checks its own, so that a typo fails before the dry run prints
    # a plan (and before a real run starts any worker); the sweep runs on the fa4 backend
    baseline = data.get("baseline", "A0")
    if not isinstance(baseline, str) or not baseline.strip():
        raise UsageError(f"{path}: baseline must be one variant name, got {baseline!r}")
    also = data.get("also_compare")
    if also is None:
        also = []
    # a bare string would otherwise be taken apart character by character
    if not isinstance(also, list) or not all(isinstance(n, str) and n.strip() for n in also):
        raise UsageError(f"{path}: also_compare must be a list of variant names, got {also!r}",
                         hint="also_compare: [A1]")
    for key, name in [("baseline", baseline), *(("also_compare", n) for n in also)]:
        try:
            check("fa4", name.strip())
        except UsageError as e:
            # check's "--backend X" hint is for the command line; this sweep only ever runs on fa4
            hint = None if (e.hint or "").startswith("--backend") else e.hint
            raise UsageError(f"{path}: {key}: {e}", hint=hint) from None
    # each setting and each also_compare is one kernel of the sweep, timed under its own name
    refuse_repeats((*(s.variant for s in settings), *(n.strip() for n in also)), f"the sweep file {path}")
    return EmulationSweep(shape=shape, protocol=protocol, settings=tuple(settings),
                          baseline=baseline.strip(), also_compare=tuple(n.strip() for n in also),
                          name=str(data.get("name", "")),
                          source=str(path), notes=str(data.get("notes", "")), raw=data)
