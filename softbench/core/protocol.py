"""Measurement protocols as data: frozen, validated, loadable from YAML, so that a session records exactly the
protocol it ran. Three latency protocols, each answering a different question on a power-capped GPU:

- `interleaved` (the default): every kernel process alive, single windows alternated in a balanced order, so
  both kernels of a pair run at the same SM clock: the speed-up *at equal clock* (what the instructions buy).
- `sustained`: each kernel in its own long block, measured once the board has settled at that kernel's own power
  and clock equilibrium: the speed-up a user running the kernel continuously gets (*sustained*, at the cap).
- `paper`: the paper's Appendix B.3 rounds (A0A1, A1A0, ...), kept unchanged for reproducing it; it mixes the two
  quantities, since each kernel's process starts from the clock the other left."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import ClassVar

from softbench.core.errors import UsageError
from softbench.core.numbers import finite
from softbench.core.shapes import SHAPE_KEYS, check_shape_mapping
from softbench.core.textfile import parse_yaml


# the largest seed every consumer takes: torch's manual_seed a signed 64-bit integer, numpy's generators any
# non-negative one (a larger seed failed inside the worker, after its session had started)
MAX_SEED = 2**63 - 1
# the most calls one timed window holds, fixed or sized from --window-ms: a window is meant to last milliseconds, and
# 100,000 of the fastest kernel's calls (about 10 us each) already take a second; a count past this is a typo that
# would hold a worker for hours before the first pair, since the budget is only checked between windows
MAX_WINDOW_CALLS = 100_000
# the longest any duration of a protocol may be (a budget, a block, a loop, a warm-up): a day. Past it a value is a
# typo, and it ran until killed (a budget of 1e12 s); the command line's options take the same bound
MAX_SECONDS = 86_400
# the most repetitions of a measurement (rounds, windows per round, blocks per kernel): 1,000 rounds of the default
# 30 s budget already take 8 hours; 10^20 of them ran until killed
MAX_REPEATS = 1_000
# field -> (its largest value, the words after that value in a refusal), whichever protocol has the field; warm-up
# calls and the calls between two synchronizations are bounded as a window's calls are
LIMITS = {
    **{name: (MAX_SECONDS, "s (a day)") for name in ("budget_s", "measure_s", "seconds", "idle_s", "pre_s", "post_s",
                                                     "warmup_min_s", "warmup_max_s", "settle_min_s", "settle_max_s")},
    **{name: (MAX_REPEATS, "") for name in ("rounds", "windows", "cycles")},
    **{name: (MAX_WINDOW_CALLS, "calls") for name in ("warmup", "chunk")},
}


def _check_fields(proto, positive_ints=(), non_negative_ints=(), positive_floats=(), non_negative_floats=(),
                  seeds=(), window_calls=()) -> None:
    for name in (*positive_ints, *window_calls):
        v = getattr(proto, name)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise UsageError(f"protocol: {name} must be a positive integer, got {v!r}")
    for name in window_calls:
        if getattr(proto, name) > MAX_WINDOW_CALLS:
            raise UsageError(f"protocol: {name} must be at most {MAX_WINDOW_CALLS:,} calls per window, got "
                             f"{getattr(proto, name):,}")
    for name in (*non_negative_ints, *seeds):
        v = getattr(proto, name)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise UsageError(f"protocol: {name} must be a non-negative integer, got {v!r}")
    for name in seeds:  # and no larger than every consumer of a seed takes
        if getattr(proto, name) > MAX_SEED:
            raise UsageError(f"protocol: {name} must be at most {MAX_SEED}, got {getattr(proto, name)}")
    # finite as well: an infinite budget or window passes `> 0` and then never ends, and an integer past a float's
    # range passes `< inf` and then fails the first time it meets a float
    for name in positive_floats:
        v = getattr(proto, name)
        if finite(v) is None or not v > 0:
            raise UsageError(f"protocol: {name} must be a finite positive number, got {v!r}")
    for name in non_negative_floats:
        v = getattr(proto, name)
        if finite(v) is None or not v >= 0:
            raise UsageError(f"protocol: {name} must be a finite non-negative number, got {v!r}")
    for name in (*positive_ints, *non_negative_ints, *positive_floats, *non_negative_floats):
        limit, unit = LIMITS.get(name, (None, ""))
        if limit is not None and getattr(proto, name) > limit:
            raise UsageError(f"protocol: {name} must be at most {f'{limit:,} {unit}'.strip()}, got "
                             f"{getattr(proto, name)!r}")


PROTOCOL_KINDS: dict[str, type] = {}  # kind -> protocol class, filled by each class statement below


class _ProtocolBase:
    """A latency protocol: its kind (the name a file or --protocol gives) and the quantity it measures are named in
    its class statement, which also registers it, so that a new protocol is written in one place."""

    kind: ClassVar[str]
    quantity: ClassVar[str]

    def __init_subclass__(cls, kind: str, quantity: str, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.kind, cls.quantity = kind, quantity
        PROTOCOL_KINDS[kind] = cls

    def to_dict(self) -> dict:
        return {"kind": self.kind, **asdict(self)}

    def with_overrides(self, **overrides):
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})


def _check_window(proto, low: str, high: str) -> None:
    """A warm-up's window (softbench.runtime.settle.SettleRule): it lasts at least `low`, at most `high` seconds."""
    _check_fields(proto, non_negative_floats=(low, high))  # numbers first: null or text in a file once met `<=`
    lo, hi = getattr(proto, low), getattr(proto, high)
    if not (0 <= lo <= hi):
        raise UsageError(f"protocol: need 0 <= {low} <= {high}, got {lo}, {hi}")


@dataclass(frozen=True)
class _Settled:
    """Runs that wait for the board to settle at the kernel's own equilibrium before they measure (the sustained
    protocol's blocks, energy's loops): the window of that wait, with its defaults, in one place."""

    settle_min_s: float = 2.0
    settle_max_s: float = 20.0

    def __post_init__(self):
        _check_window(self, "settle_min_s", "settle_max_s")

    def settle_rule(self) -> dict:
        """The window as the worker's `settle` request field (softbench.runtime.settle.SettleRule's keywords)."""
        return {"min_s": self.settle_min_s, "max_s": self.settle_max_s}


@dataclass(frozen=True)
class InterleavedProtocol(_ProtocolBase, kind="interleaved", quantity="at equal clock"):
    """Single windows of every kernel alternated, each cycle in a fresh random order (or the carry-over circuit),
    after a warm-up that ends when the power and SM clock readings settle; pairs of windows until the 95% interval of
    every gated paired speed-up is at most `target_pp` wide on each side, or `budget_s` of measuring is spent.
    `rounds` repeats that measurement (each with its own stopping rule) inside the same processes."""

    # Windows are sized in time: as many calls as fill `window_ms`, from the baseline's time per call measured
    # before the warm-up (`calls` given fixes the count instead). On the H200 the power controller moves the SM
    # clock by up to 20% between consecutive 36 ms windows (100 calls at FP8 causal 8K), so a pair of such windows
    # does not share a clock and the window after a power-hungry kernel ran 2-3% slower; at 7-9 ms the carry-over
    # left was within +-0.5% and the 95% interval reached +-0.25 pp in 15-22 s (sessions 20261201T1144-1147).
    # Much shorter windows leave the GPU idle between them: at 3.4 ms it never reached the power cap and the A/A
    # null missed 0 ([+0.06, +0.67]).
    calls: int | None = None
    window_ms: float = 8.0
    untimed: int = 5  # calls before each timed window: another process has just used the GPU
    target_pp: float = 0.25
    min_pairs: int = 20
    max_pairs: int = 5000
    budget_s: float = 30.0
    check_every: int = 2  # cycles between two evaluations of the stopping rule
    # random: a random permutation of the kernels every cycle, one pair per cycle (the default: no carry-over of
    # any order favours a kernel); circuit: every kernel after every kernel once per n*n windows, pairs by
    # predecessor (balances the previous window only; softbench.latency.schedule says why that is not enough)
    order: str = "random"
    # the random order's seed. None: drawn afresh for every run and recorded (run.order.seed). With one fixed
    # seed every invocation repeats the same sequence of permutations, so whatever imbalance that sequence has
    # (on the H200 the baseline came after its null twin in 53-54% of 4-kernel cycles, in every invocation, while
    # the later of two windows in a cycle ran 0.3-1.4% slower) does not average out over invocations
    order_seed: int | None = None
    rounds: int = 1
    warmup_min_s: float = 3.0
    warmup_max_s: float = 20.0
    seed: int = 0

    def __post_init__(self):
        _check_fields(self, positive_ints=("min_pairs", "max_pairs", "check_every", "rounds"),
                      window_calls=("calls",) if self.calls is not None else (),
                      non_negative_ints=("untimed",),
                      seeds=("seed",) + (("order_seed",) if self.order_seed is not None else ()),
                      positive_floats=("target_pp", "budget_s", "window_ms"))
        _check_window(self, "warmup_min_s", "warmup_max_s")
        if self.min_pairs > self.max_pairs:
            raise UsageError(f"protocol: min_pairs ({self.min_pairs}) exceeds max_pairs ({self.max_pairs})")
        if self.order not in ("random", "circuit"):
            raise UsageError(f"protocol: the interleaved order must be 'random' or 'circuit', got {self.order!r}")
        if self.window_ms / 1e3 > self.budget_s:
            # the budget is checked between windows: one longer than it would run on past it, unbounded
            raise UsageError(f"protocol: a window of {self.window_ms:g} ms is longer than the measuring budget of "
                             f"{self.budget_s:g} s", hint="shorten --window-ms or raise --budget-s")


@dataclass(frozen=True)
class SustainedProtocol(_ProtocolBase, _Settled, kind="sustained", quantity="sustained"):
    """Blocks of one kernel each, `cycles` blocks per kernel in ABBA order (for two kernels: A B B A A B B A,
    an even number of at least 4 blocks); each block runs until that kernel's power and clock have settled
    (between `settle_min_s` and `settle_max_s`), then measures `measure_s` seconds of windows with the energy
    counter around them."""

    calls: int = 100
    cycles: int = 4
    measure_s: float = 4.0
    seed: int = 0

    def __post_init__(self):
        super().__post_init__()
        if not isinstance(self.cycles, int) or isinstance(self.cycles, bool) or self.cycles < 2:
            raise UsageError(f"protocol: cycles must be an integer of at least 2 (4 blocks for two kernels), "
                             f"got {self.cycles!r}")
        _check_fields(self, window_calls=("calls",), seeds=("seed",), positive_floats=("measure_s",),
                      positive_ints=("cycles",))


# the paper protocol's orders; the interleaved protocol has an `order` too, with other values (random, circuit)
PAPER_ORDERS = ("alternate", "fixed")


@dataclass(frozen=True)
class LatencyProtocol(_ProtocolBase, kind="paper",
                      quantity="rounds (paper B.3: equal-clock and sustained effects mixed)"):
    """Paper B.3 defaults: 3 rounds in alternating order, 50 warm-up calls, 7 windows of 100 calls each."""

    rounds: int = 3
    windows: int = 7
    calls: int = 100
    warmup: int = 50
    seed: int = 0
    order: str = "alternate"  # alternate: A0A1, A1A0, A0A1, ...; fixed: A0A1 every round

    def __post_init__(self):
        _check_fields(self, positive_ints=("rounds", "windows"), window_calls=("calls",),
                      non_negative_ints=("warmup",), seeds=("seed",))
        if self.order not in PAPER_ORDERS:
            raise UsageError(f"protocol: order must be 'alternate' or 'fixed', got {self.order!r}")

    def round_order(self, first: str, second: str) -> list[tuple[str, str]]:
        """Which variant runs first in each round: (first, second), (second, first), ... when alternating."""
        out = []
        for r in range(self.rounds):
            swap = self.order == "alternate" and r % 2 == 1
            out.append((second, first) if swap else (first, second))
        return out


PaperProtocol = LatencyProtocol
AnyProtocol = InterleavedProtocol | SustainedProtocol | LatencyProtocol


def packaged_protocols() -> list[str]:
    """The protocol files shipped inside the package (softbench/protocols/*.yaml), by name."""
    from importlib.resources import files

    return sorted(f.name[:-5] for f in files("softbench.protocols").iterdir() if f.name.endswith(".yaml"))


def packaged_protocol(name: str) -> str:
    """The text of a shipped protocol file, read through importlib.resources so that it works from a wheel."""
    from importlib.resources import files

    entry = files("softbench.protocols") / f"{name}.yaml"
    if not entry.is_file():
        raise UsageError(f"no packaged protocol named {name!r} (packaged: {', '.join(packaged_protocols())})")
    return entry.read_text(encoding="utf-8")


def read_protocol_text(path: Path | str) -> tuple[str, str]:
    """(text, source) of a protocol given as a file path or as the name of a packaged protocol ("energy")."""
    from softbench.core.textfile import read_text_file

    p = Path(path)
    if p.exists():
        return read_text_file(p, "protocol file"), str(p)
    name = p.name[:-5] if p.name.endswith(".yaml") else p.name
    if str(p) == p.name and name in packaged_protocols():
        return packaged_protocol(name), f"softbench/protocols/{name}.yaml"
    raise UsageError(f"protocol file {p} does not exist",
                     hint=f"a packaged protocol can be named instead: {', '.join(packaged_protocols())}")


def load_yaml_mapping(path: Path | str) -> dict:
    text, p = read_protocol_text(path)
    data = parse_yaml(text, f"protocol file {p}", "a protocol file")
    if not isinstance(data, dict):
        raise UsageError(f"protocol file {p} must hold a mapping at the top level")
    return data


def latency_protocol_from_mapping(data: dict, source: str = "protocol") -> LatencyProtocol:
    """The paper's rounds protocol from a mapping (the emulation sweep runs only this one)."""
    proto = any_protocol_from_mapping(data, source, default_kind="paper")
    if not isinstance(proto, LatencyProtocol):
        raise UsageError(f"{source}: this command runs the paper's rounds protocol, not {proto.kind}")
    return proto


def any_protocol_from_mapping(data: dict, source: str = "protocol", default_kind: str | None = None) -> AnyProtocol:
    """One of the three protocols from a mapping; `kind` names it. Without `kind`, a mapping that names a key
    only the paper's protocol has (windows, warmup) or one of its orders (alternate, fixed) is the paper's
    protocol, as every file written before the other two existed; anything else is `default_kind` (interleaved
    unless said): `order: circuit` or `order: random` is the interleaved protocol's."""
    section = data.get("protocol", data)
    if not isinstance(section, dict):
        raise UsageError(f"{source}: 'protocol' must be a mapping")
    section = dict(section)
    kind = section.pop("kind", None)
    if kind is not None and not isinstance(kind, str):
        raise UsageError(f"{source}: the protocol kind must be a name ({', '.join(PROTOCOL_KINDS)}), not {kind!r}")
    if kind is None:
        names_paper = bool({"windows", "warmup"} & set(section)) or section.get("order") in PAPER_ORDERS
        kind = "paper" if names_paper else (default_kind or "interleaved")
    cls = PROTOCOL_KINDS.get(kind)
    if cls is None:
        raise UsageError(f"{source}: unknown protocol kind {kind!r} (known: {', '.join(PROTOCOL_KINDS)})")
    known = {f.name for f in fields(cls)}
    unknown = set(section) - known
    if unknown:
        raise UsageError(f"{source}: unknown {kind} protocol keys {sorted(unknown)} (known: {sorted(known)})")
    return cls(**section)


@dataclass(frozen=True)
class LatencyPlan:
    """A latency protocol file: the protocol, and optionally the cells (shapes) and the pair of variants it is for.
    Shape keys of a cell override the file's `shape` defaults."""

    protocol: AnyProtocol
    shape_defaults: dict
    cells: tuple[dict, ...]
    baseline: str | None = None
    variant: str | None = None
    backend: str | None = None

    def shapes(self):
        from softbench.core.shapes import shape_from_mapping

        return tuple(shape_from_mapping({**self.shape_defaults, **cell}, f"protocol cell {i + 1}")
                     for i, cell in enumerate(self.cells))


_PLAN_KEYS = {"name", "description", "protocol", "shape", "cells", "baseline", "variant", "backend"}


def latency_plan_from_mapping(data: dict, source: str = "protocol") -> LatencyPlan:
    """Validate a protocol file. A file with only protocol keys (rounds, windows, ...) at the top level is a plan
    with no cells, for compatibility with the short form."""
    if "protocol" not in data and "cells" not in data:
        return LatencyPlan(any_protocol_from_mapping(data, source), {}, ())
    unknown = set(data) - _PLAN_KEYS
    if unknown:
        raise UsageError(f"{source}: unknown keys {sorted(unknown)} (known: {sorted(_PLAN_KEYS)})")
    if not isinstance(data.get("protocol") or {}, dict):
        raise UsageError(f"{source}: 'protocol' must be a mapping")
    for key in ("baseline", "variant", "backend"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise UsageError(f"{source}: {key!r} must be one name, not {data[key]!r}")
    proto = any_protocol_from_mapping(data.get("protocol") or {}, source)
    defaults = data.get("shape") or {}
    cells = data.get("cells") or []
    if not isinstance(cells, list):
        raise UsageError(f"{source}: 'cells' must be a list of mappings of the shape's fields")
    for i, cell in enumerate([defaults, *cells]):
        check_shape_mapping(cell, f"{source}: " + ("shape" if i == 0 else f"cell {i}"))
    if defaults and not cells:
        # the shape alone is the file's one cell: left with no cells, the command line's shape would run instead
        cells = [{}]
    plan = LatencyPlan(proto, dict(defaults), tuple(dict(c) for c in cells), data.get("baseline"),
                       data.get("variant"), data.get("backend"))
    plan.shapes()  # every cell must be a valid shape before anything runs
    return plan


@dataclass(frozen=True)
class EnergyProtocol(_Settled):
    """The energy command's sustained loops (paper B.3, Table B5f; softbench/protocols/energy.yaml): the one home of
    their settings, defaults and checks, and optionally the shape. A run (softbench.energy.engine.EnergyOptions)
    holds the protocol it ran. Every duration is in seconds (the command line and a protocol file give the sampling
    interval in milliseconds, as `--interval-ms` and `interval_ms`). A shape key left at None is not set by the
    protocol, so the command keeps its own default (the dtype's depends on the GPU)."""

    order: tuple[str, ...] = ("A0", "A1", "A1", "A0")
    seconds: float = 45.0
    interval_s: float = 0.1
    trim_start: int = 20
    trim_end: int = 10
    idle_s: float = 5.0
    pre_s: float = 2.0
    post_s: float = 1.0
    warmup: int = 30
    chunk: int = 50
    ramp_fraction: float = 0.9
    seed: int = 0
    # after the warm-up calls, chunks run until power and SM clock settle (_Settled: settle_min_s, settle_max_s),
    # so that the timed loop and the energy counter start at the board's equilibrium for this kernel, not on its ramp
    dtype: str | None = None
    seq: tuple[str, ...] | None = None
    causal: bool | None = None
    batch: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None

    def __post_init__(self):
        from softbench.core.shapes import DTYPES, parse_seq

        super().__post_init__()
        if not isinstance(self.order, tuple) or not all(isinstance(v, str) for v in self.order):
            raise UsageError(f"protocol: order must be kernel names, comma-separated or as a list, got {self.order!r}")
        if not self.order:
            raise UsageError("protocol: order names no loops")
        _check_fields(self, positive_ints=("chunk",), non_negative_ints=("trim_start", "trim_end", "warmup"),
                      positive_floats=("seconds",), non_negative_floats=("idle_s", "pre_s", "post_s"), seeds=("seed",))
        # NVML updates its power reading at most every few milliseconds; a finer request would only repeat it
        if finite(self.interval_s) is None or self.interval_s < 1e-3:
            # in milliseconds, as --interval-ms and a file's interval_ms give it
            got = f"{self.interval_s * 1e3:g} ms" if finite(self.interval_s) is not None else repr(self.interval_s)
            raise UsageError(f"protocol: the sampling interval must be a finite number of at least 1 ms, got {got}")
        if finite(self.ramp_fraction) is None or not 0 < self.ramp_fraction <= 1:
            raise UsageError(f"protocol: ramp_fraction must be in (0, 1], got {self.ramp_fraction!r}")
        _check_fields(self, positive_ints=tuple(k for k in ("batch", "heads", "kv_heads", "head_dim")
                                                if getattr(self, k) is not None))
        if self.dtype is not None and self.dtype not in DTYPES:
            raise UsageError(f"protocol: dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        if self.causal is not None and not isinstance(self.causal, bool):
            raise UsageError(f"protocol: causal must be true or false, got {self.causal!r}")
        for text in self.seq or ():
            parse_seq(text)  # refuses a length it cannot read, in its own words

    @property
    def variants(self) -> list[str]:
        """Each kernel once, in the order of its first loop: one worker per kernel serves all its loops."""
        return list(dict.fromkeys(self.order))

    def loop_settings(self) -> dict:
        """The loops' settings by field name: everything but the shape keys."""
        return {k: v for k, v in asdict(self).items() if k not in SHAPE_KEYS}

    def check_trim(self) -> None:
        """The paper's trim must leave samples of every loop. Checked on the settings a run uses, not on a
        protocol file alone: the command line may lengthen the loops that the file's trim is meant for."""
        expected = (self.pre_s + self.seconds + self.post_s) / self.interval_s
        if self.trim_start + self.trim_end >= expected:
            raise UsageError(f"trimming {self.trim_start} + {self.trim_end} samples leaves nothing of the about "
                             f"{expected:.0f} samples a loop gives", hint="lengthen --seconds or trim less")

    def settings(self) -> dict:
        """The values this protocol sets, by field name (the shape keys only where it names them)."""
        return {k: v for k, v in asdict(self).items() if v is not None}


def energy_protocol_from_mapping(data: dict, source: str = "protocol") -> EnergyProtocol:
    """An energy protocol file's mapping. Its keys are the command's options (`interval_ms` as `--interval-ms`),
    `order` comma-separated or a list, `seq` one length or a list of them."""
    # the settle window is no file setting, as it is no command-line option: its defaults serve every run
    known = ({f.name for f in fields(EnergyProtocol)} - {"interval_s", "settle_min_s", "settle_max_s"}) | {"interval_ms"}
    for key in data:
        if key not in known:
            raise UsageError(f"{source}: unknown key {key!r}", hint=f"known: {', '.join(sorted(known))}")
    values = dict(data)
    if "order" in values:
        order = values["order"]
        values["order"] = (tuple(v.strip() for v in order.split(",") if v.strip()) if isinstance(order, str)
                           else tuple(map(str, order)) if isinstance(order, list) else order)
    if "interval_ms" in values:
        ms = values.pop("interval_ms")
        if finite(ms) is None or ms < 1:
            raise UsageError(f"{source}: interval_ms must be a finite number of at least 1, got {ms!r}")
        values["interval_s"] = ms / 1e3
    if "seq" in values:
        values["seq"] = tuple(str(v) for v in (values["seq"] if isinstance(values["seq"], list) else [values["seq"]]))
    try:
        return EnergyProtocol(**values)
    except UsageError as e:  # name the file rather than "protocol"
        raise UsageError(f"{source}: {str(e).removeprefix('protocol: ')}") from None


def load_energy_protocol(path: Path | str) -> EnergyProtocol:
    """An energy protocol from a file path or by packaged name (`--protocol energy`)."""
    return energy_protocol_from_mapping(load_yaml_mapping(path), str(path))
