"""Evaluate the gates again from the probabilities a gates session already read back, with this version's gate
model, into a new session. The readbacks are the measurement (kernel outputs recorded on the GPU); the gates are
pure functions of them, so a corrected tolerance model can be applied on any machine without running a kernel.

The new session names its source, the sha256 of every readback it read and the source's environment, so the
result stays traceable to the GPU run; the readback files themselves stay with the source."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from softbench.core.errors import UsageError
from softbench.kernels.patch import sha256_file
from softbench.gates.engine import evaluate
from softbench.gates.maps import gate_map_named
from softbench.gates.options import GatesOptions, rescale_threshold
from softbench.gates.readback import load_readback, readback_path
from softbench.gates.record import record_gates
from softbench.core.shapes import Shape


def reevaluate_gates(source: Path, out_dir: Path, command_line: str = ""):
    """Returns (session, summary) like run_gates. Refuses a source that is not a complete gates session or whose
    readback files are missing (they are large and not always kept with a session)."""
    from softbench.core.envinfo import collect_env
    from softbench.core.session import Session, utc_iso

    source = Path(source)
    proto_path = source / "protocol.yaml"
    if not proto_path.is_file():
        raise UsageError(f"{source} is not a session folder (no protocol.yaml)")
    proto = yaml.safe_load(proto_path.read_text())
    if not isinstance(proto, dict) or proto.get("command") != "gates":
        raise UsageError(f"{source} is not a gates session")
    base, var = proto["labels"]
    shapes = {k: Shape(**v) for k, v in proto["shapes"].items()}
    multi = shapes["multi_tile"]
    causal = multi.causal
    files = {(kind, label): readback_path(source, label, shape.seq)
             for kind, shape in shapes.items() for label in (base, var)}
    missing = [p.name for p in files.values() if not p.is_file()]
    if missing:
        raise UsageError(f"{source} lacks the readback files {', '.join(sorted(missing))}",
                         hint="they stay in the session folder the GPU run wrote; copy them back first")
    env = json.loads((source / "env.json").read_text()) if (source / "env.json").is_file() else {}
    arch = (env.get("workers", {}).get(var, {}).get("device") or {}).get("arch")
    tau = rescale_threshold(proto["backend"], arch, multi.dtype, proto.get("backend_options") or {})
    readbacks = {kind: {label: load_readback(files[(kind, label)], causal) for label in (base, var)}
                 for kind in shapes}
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
