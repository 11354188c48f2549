"""What sessions record, as a prediction may name it: the scope keys each command's sessions hold and the
evidence kinds they supply. `seal` checks a predictions file against this before anything is written, so that a
scope key or evidence kind that no session records (a typo: `colour`, `vibes`) cannot make a prediction
unverifiable forever. tests/test_vocabulary.py holds it against the recorded sessions and freshly written ones.

A scope key is
- a fact every session has: `command`, the shape fields, and the provenance that env.json records
  (`source_sha256`: softbench's own sources, `git_commit`; `gpu_name` and `gpu_capability`: the GPU it ran on);
- a top-level key that the command writes into summary.json or protocol.yaml (`backend`, `variant`, ...);
- a dotted path whose first part is such a key (`median_ms.A1`); under `protocol.` only the fields that the
  command's protocol records (`protocol.rounds`)."""

from __future__ import annotations

from dataclasses import fields

from softbench.core.protocol import InterleavedProtocol, LatencyProtocol, SustainedProtocol
from softbench.core.shapes import SHAPE_KEYS
from softbench.core.suggest import did_you_mean

# read from env.json's "softbench" block (see sessions.session_facts)
CODE_KEYS = ("source_sha256", "git_commit")
# read from env.json's "gpu" block: the board a session ran on (its name as torch reports it, e.g. "NVIDIA B200";
# its compute capability, e.g. "10.0"), so that a prediction for one GPU is not scored on another's sessions
GPU_KEYS = ("gpu_name", "gpu_capability")
PROVENANCE_KEYS = CODE_KEYS + GPU_KEYS

# summary.json and protocol.yaml top-level keys, by command (as the commands write them)
_COMMON = ("command", "complete", "finished_utc", "started_utc", "command_line", "backend", "backend_options",
           "incomplete_reason")
RECORDED: dict[str, frozenset[str]] = {c: frozenset(_COMMON + extra) for c, extra in {
    "latency": ("baseline", "variant", "labels", "shape", "shape_tag", "protocol", "order", "median_ms", "n_windows",
                "speedup_pct", "per_round_speedup_pct", "per_round_sd_pp", "bootstrap_ci95_pct", "bootstrap_method",
                "outlier_windows", "rounds_complete", "sm_clock_mhz_median", "sm_clock_mhz_range", "smoke", "tflops",
                "throttled_windows",
                # the interleaved and sustained protocols
                "protocol_kind", "quantity", "kernels", "comparisons", "variants", "null", "references",
                "speedup_ci95_pct", "null_pct", "null_ci95_pct", "best_exact", "vs_best_exact", "run", "device",
                "timings_are", "roles", "carryover", "clock_during_pairs",
                # the baseline's error against FP32 beside the references' (softbench.latency.exactness)
                "exactness",
                # a matrix run across GPUs (latency --gpus): rank, GPU, CUDA_VISIBLE_DEVICES, UUID, cell, phase
                "placement",
                # several processes per kernel (--processes) and the null inside the baseline's process
                "processes_per_kernel", "process_pairs", "null_in_process",
                # the variants' own kernel configuration (--variant-config)
                "variant_backend_options"),
    "sweep": ("baseline", "kind", "measured", "protocol", "rows", "shape", "shape_tag", "variants",
              "protocol_kind", "quantity", "null", "references", "processes_per_kernel", "null_in_process"),
    "energy": ("baseline", "chunk", "dtype", "dtype_note", "idle_s", "interval_s", "loops", "order", "out_dir",
               "post_s", "pre_s", "protocol", "ramp_fraction", "seconds", "seed", "shape", "shape_tag", "trim_end",
               "trim_start", "variants", "vs_baseline", "warmup",
               # each loop's settle window (EnergyProtocol, since 2026-12-01)
               "settle_min_s", "settle_max_s"),
    "trace": ("baseline", "calls", "keep_bytes", "nsys", "out_dir", "points", "seed", "shapes", "source", "table",
              "timeout_s", "tool", "variants", "warmup",
              # the rule each process settled by before its traced calls (None: --no-settle), and the timed
              # window's length where --calls did not give its count
              "settle", "window_s"),
    "audit": ("calls", "dependency_depth", "errors", "evidence", "kernel", "kernel_regex", "launch_skip",
              "local_bytes", "ncu", "ncu_metrics", "ncu_notes", "per_element", "per_element_by_family",
              "per_element_dynamic", "per_element_dynamic_notes", "per_element_elements_static",
              "per_element_emulated_static", "per_element_method", "per_element_notes", "per_element_reference",
              "registers", "registers_source",
              "sass", "seed", "shape", "shape_tag", "spills", "spills_method", "stack_bytes", "tools", "variants",
              "warmup", "collector", "counter_check", "counter_reader", "counter_reader_failures",
              "counter_readers",
              # a cross-compile (--arch sm_100a): the target, and the nominal per-score budget beside per_element
              "arch", "compiled_only", "target", "target_sms", "budget",
              # --backend triton: the configuration compiled and one iteration of its key loop
              "kernel_config", "loop",
              # --reference: exact kernels profiled beside the variants (their rows are ref-<name>)
              "references",
              # --source-stalls: the Nsight Compute sections asked for beyond the metrics (protocol), and each
              # launch's per-instruction warp-stall samples, summarized
              "ncu_sections", "source_stalls"),
    "gates": ("all_passed", "baseline", "envelope", "failed", "gates", "labels", "non_finite_readback_values",
              "not_applicable", "readback_sha256", "reevaluated_from", "reference", "reference_note",
              "rescale_threshold", "seed", "shapes", "source_command_line", "storage", "tag", "variant"),
    "fidelity": ("baseline", "block_ids", "block_len", "block_len_requested", "blocks_complete", "blocks_planned",
                 "bootstrap", "bos", "bos_note", "conditions", "contrasts", "corpus", "device", "dtype", "fp8_operands",
                 "fp8_storage", "gate", "kernels", "model", "path", "rescale_threshold", "tile", "token_signature",
                 "tokenizer_check", "updated_utc", "warnings", "world_sizes"),
}.items()}

# the fields of the `protocol` mapping each command records
_LATENCY_PROTOCOL = frozenset({"kind"} | {f.name for c in (LatencyProtocol, InterleavedProtocol, SustainedProtocol)
                                           for f in fields(c)})
PROTOCOL_FIELDS: dict[str, frozenset[str]] = {
    "latency": _LATENCY_PROTOCOL,
    "sweep": _LATENCY_PROTOCOL,
    "energy": frozenset(("backend", "backend_options", "chunk", "command_line", "dtype_note", "idle_s", "interval_s",
                         "order", "out_dir", "post_s", "pre_s", "ramp_fraction", "seconds", "seed", "shape",
                         "trim_end", "trim_start", "warmup", "settle_min_s", "settle_max_s")),
}

# sessions that are records, not evidence (an environment; the index of a latency matrix across GPUs, which
# lists latency sessions): no prediction scopes them
RECORDS_ONLY = ("env", "matrix")
COMMANDS = tuple(sorted(RECORDED))
# beyond the commands themselves: the kinds an audit summary lists under `evidence`
EVIDENCE_KINDS = tuple(sorted(set(COMMANDS) | {"sass", "ncu"}))


def _commands_in(scope: dict) -> list[str] | None:
    """The commands a scope limits itself to; None when it names none (then any command's keys are allowed)."""
    want = scope.get("command")
    if want is None:
        return None
    return [str(w) for w in (want if isinstance(want, list) else [want])]


def scope_key_problem(key: str, scope: dict) -> tuple[str, str | None] | None:
    """None when sessions of the scope's commands record `key`; else (why, hint)."""
    commands = _commands_in(scope)
    bad = [c for c in commands or () if c not in RECORDED]  # no command: any command's keys
    if key == "command":
        if bad:
            return (f"{bad[0]!r} is not a command that records sessions (known: {', '.join(COMMANDS)})",
                    did_you_mean(bad[0], COMMANDS))
        return None
    if bad:  # the scope's own `command` is what is wrong, and its check says so, whichever key comes first
        return None
    where = commands or list(COMMANDS)
    head, _, rest = key.partition(".")
    known = set(SHAPE_KEYS) | set(PROVENANCE_KEYS)
    for c in where:
        known |= RECORDED[c]
    who = f"{'/'.join(where)} session" if commands else "session"
    if head not in known:
        return (f"no {who} records {head!r}",
                did_you_mean(head, known) or f"scope keys: {', '.join(sorted(known))}")
    if head == "protocol" and rest:
        field = rest.split(".")[0]
        pknown = set().union(*(PROTOCOL_FIELDS.get(c, frozenset()) for c in where))
        if field not in pknown:
            return (f"no {who} records protocol field {field!r}",
                    did_you_mean(field, pknown) or (f"protocol fields: {', '.join(sorted(pknown))}" if pknown
                                                    else None))
    return None


def evidence_problem(kind: str) -> tuple[str, str | None] | None:
    """None when some session supplies evidence of this kind; else (why, hint)."""
    if kind in EVIDENCE_KINDS:
        return None
    return (f"{kind!r} is not an evidence kind any session supplies (known: {', '.join(EVIDENCE_KINDS)})",
            did_you_mean(kind, EVIDENCE_KINDS))
