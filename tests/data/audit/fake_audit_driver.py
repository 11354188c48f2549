"""Stand-in for softbench.audit.driver in tests (hand-made): leaves a fake cubin where CuTe DSL would
(CUTE_DSL_DUMP_DIR) and writes a result like the real driver. Variant "broken" fails like a crashed compile."""
import json
import os
import sys
from pathlib import Path

req_path, res_path = map(Path, sys.argv[1:3])
req = json.loads(req_path.read_text())
v = req["variant"]
if v == "broken":
    res_path.write_text(json.dumps({"ok": False, "error": "MeasurementError: compile failed (fake)",
                                    "type": "MeasurementError"}))
    sys.exit(1)
dump = Path(os.environ["CUTE_DSL_DUMP_DIR"])
(dump / f"cutlass___call___flash_fwd_{v}.sm_90a.cubin").write_text(f"FAKE-CUBIN variant={v}\n")
res_path.write_text(json.dumps({"ok": True, "variant": v, "load_s": 0.1, "compile_s": 0.2,
                                "forwards": 1 + req["warmup"] + req["calls"], "load": {"patch": {"patch": "fake"}},
                                "target_seen": req.get("target"),
                                "env_seen": {k: os.environ.get(k) for k in ("CUTE_DSL_KEEP", "CUTE_DSL_PTXAS_PATH",
                                             "FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED", "FLASH_ATTENTION_ARCH",
                                             "CUTE_DSL_ARCH", "FLASH_ATTENTION_NUM_SMS")}}))
