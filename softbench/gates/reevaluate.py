"""Evaluate the gates again from the probabilities a gates session already read back, with this version's gate
model, into a new session. The readbacks are the measurement (kernel outputs recorded on the GPU); the gates are
pure functions of them, so a corrected tolerance model can be applied on any machine without running a kernel.

The new session names its source, the sha256 of every readback it read and the source's environment, so the
result stays traceable to the GPU run; the readback files themselves stay with the source."""

from __future__ import annotations

import pickle
from pathlib import Path

from softbench.core.datafile import DamagedFile, load_mapping
from softbench.core.errors import UsageError
from softbench.core.session import STATUS_FILE
from softbench.core.shapes import Shape
from softbench.gates.engine import evaluate
from softbench.gates.maps import gate_map_named
from softbench.gates.options import GatesOptions, rescale_threshold
from softbench.gates.readback import load_readback, readback_path, same_inputs
from softbench.gates.record import record_gates
from softbench.kernels.patch import sha256_file


def reevaluate_gates(source: Path, out_dir: Path, command_line: str = ""):
    """Returns (session, summary) like run_gates. Refuses a source that is not a complete gates session or whose
    readback files are missing (they are large and not always kept with a session)."""
    from softbench.core.envinfo import collect_env
    from softbench.core.session import Session
    from softbench.core.utc import utc_iso

    source = Path(source)
    proto_path = source / "protocol.yaml"
    if not proto_path.is_file():
        raise UsageError(f"{source} is not a session folder (no protocol.yaml)")
    proto = _read(proto_path)
    if not isinstance(proto, dict) or proto.get("command") != "gates":
        raise UsageError(f"{source} is not a gates session")
    status = _read(source / STATUS_FILE) if (source / STATUS_FILE).is_file() else {}
    if not (isinstance(status, dict) and status.get("complete") is True):  # "no" written by hand is no true
        # a run stopped part-way may have written only some of its readbacks, or cut the last one short
        raise UsageError(f"{source} is not a complete gates session (its status does not say complete), so its "
                         "readbacks are not a whole measurement")
    _check_protocol(proto, proto_path)
    try:
        base, var = proto["labels"]
        shapes = {k: Shape(**v) for k, v in proto["shapes"].items()}
        multi = shapes["multi_tile"]
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise UsageError(f"{proto_path} does not describe a gates run ({type(e).__name__}: {e})") from None
    causal = multi.causal
    files = {(kind, label): readback_path(source, label, shape.seq)
             for kind, shape in shapes.items() for label in (base, var)}
    missing = [p.name for p in files.values() if not p.is_file()]
    if missing:
        raise UsageError(f"{source} lacks the readback files {', '.join(sorted(missing))}",
                         hint="they stay in the session folder the GPU run wrote; copy them back first")
    env = _read(source / "env.json") if (source / "env.json").is_file() else {}
    arch = _worker_arch(env, var)
    try:
        tau = rescale_threshold(proto["backend"], arch, multi.dtype, proto.get("backend_options") or {})
    except (TypeError, ValueError):  # the simulation's threshold, edited into something that is no number
        raise UsageError(f"{proto_path} does not describe a gates run: its rescale threshold "
                         f"{proto['backend_options'].get('rescale_threshold')!r} is not a number") from None
    readbacks = {kind: {label: _load(files[(kind, label)], causal) for label in (base, var)} for kind in shapes}
    for kind in shapes:  # here nothing ran: inputs that differ are files swapped or copied in, not two processes
        if not same_inputs(readbacks[kind][base], readbacks[kind][var]):
            raise UsageError(f"{files[(kind, base)].name} and {files[(kind, var)].name} in {source} hold different "
                             "inputs, so they are not the two readbacks of one run")
    # the map the source recorded (one written before maps were recorded was gated against Rowmax-H15)
    gmap = gate_map_named(proto.get("reference"))
    gates = evaluate(readbacks["single_tile"], readbacks["multi_tile"], base, var, tau, gmap)

    opts = GatesOptions(backend=proto["backend"], variant=proto["variant"], baseline=proto["baseline"],
                          dtype=multi.dtype, causal=causal, batch=multi.batch, heads=multi.heads,
                          kv_heads=multi.kv_heads, head_dim=multi.head_dim,
                          single_seq=shapes["single_tile"].seq, multi_seq=multi.seq)
    tag = opts.tag() + "-reevaluated"
    session = Session.create(out_dir, "gates", tag)
    session.write_yaml("protocol.yaml", {
        **proto, "reference": gmap.name, "command_line": command_line, "reevaluated_from": source.name,
        "source_command_line": proto.get("command_line", ""), "started_utc": utc_iso(),
        "readback_sha256": {p.name: sha256_file(p) for p in files.values()},
    })
    session.write_json("env.json", {"source_env": env, "reevaluated_on": collect_env(gpu=False)})
    summary = {"command": "gates", "backend": proto["backend"], "baseline": proto["baseline"],
               "variant": proto["variant"], "tag": tag, "reference": gmap.to_dict(), "complete": False,
               "reevaluated_from": source.name}
    record_gates(session, summary, gates, tau, readbacks["multi_tile"][var].storage,
                   {k: s.tag() for k, s in shapes.items()})
    return session, summary


_SHAPE_KINDS = {"single_tile", "multi_tile"}


def _check_protocol(proto: dict, path: Path) -> None:
    """The fields of a source's protocol.yaml that the re-evaluation reads, each of the kind a gates run writes:
    an edited or damaged file is refused in one sentence here rather than failing wherever the field is used."""
    def refuse(what: str):
        raise UsageError(f"{path} does not describe a gates run: {what}")

    for key in ("backend", "variant", "baseline"):
        if not isinstance(proto.get(key), str) or not proto[key]:
            refuse(f"its {key!r} is {proto.get(key)!r}, not a name")
    labels = proto.get("labels")
    if not (isinstance(labels, list) and len(labels) == 2 and all(isinstance(x, str) and x for x in labels)):
        refuse(f"its 'labels' are {labels!r}, not the two kernels' names")
    if not isinstance(proto.get("backend_options") or {}, dict):
        refuse(f"its 'backend_options' are {proto['backend_options']!r}, not a mapping")
    shapes = proto.get("shapes")
    if not (isinstance(shapes, dict) and set(shapes) == _SHAPE_KINDS
            and all(isinstance(v, dict) for v in shapes.values())):
        refuse("its 'shapes' are not one single_tile and one multi_tile shape")


def _worker_arch(env, label: str) -> int | None:
    """The GPU architecture the source's worker for `label` recorded (env.json workers.LABEL.device.arch), or None
    where the file has no such entry or another kind of value there (the threshold then takes its default)."""
    for key in ("workers", label, "device", "arch"):
        if not isinstance(env, dict):
            return None
        env = env.get(key)
    return env if isinstance(env, int) and not isinstance(env, bool) else None


def _read(path: Path) -> dict | None:
    """A source file's mapping; None where it parses to something else (the caller's check names what it should
    have been); one sentence where it cannot be read or parsed."""
    try:
        return load_mapping(path)
    except DamagedFile as e:
        if e.cause is None:
            return None
        raise UsageError(f"{path} cannot be read ({e.cause}); the source session is damaged") from None


def _load(path: Path, causal: bool):
    """A readback, or one sentence naming the file where torch cannot load it (cut short, or not a readback)."""
    try:
        return load_readback(path, causal)
    except (OSError, RuntimeError, EOFError, KeyError, TypeError, ValueError, AttributeError, IndexError,
            pickle.UnpicklingError) as e:  # AttributeError, IndexError: a pickle of something other than a readback
        raise UsageError(f"{path} is not a whole readback ({type(e).__name__}); copy it again from the GPU run's "
                         "session") from None
