"""The audit's SASS step: the cubins a compile kept, disassembled, the attention kernel picked and counted
(softbench.audit.sass parses; this module runs cuobjdump or nvdisasm and writes the dump into the session)."""

from __future__ import annotations

import gzip
import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from softbench.audit import sass as sass_mod
from softbench.audit.tools import Tools, run_tool
from softbench.core.errors import MeasurementError
from softbench.core.session import Session

if TYPE_CHECKING:
    from softbench.audit.engine import AuditOptions

SASS_GZIP_ABOVE_BYTES = 1 << 20


def kept_cubins(dump: Path) -> list[Path]:
    """Cubins in the dump folder, one per distinct content (the keep file and the harvested copy agree)."""
    seen: dict[str, Path] = {}
    for p in sorted(dump.glob("*.cubin")):
        seen.setdefault(hashlib.sha256(p.read_bytes()).hexdigest(), p)
    return list(seen.values())


def sass_step(session: Session, opts: AuditOptions, variant: str, dump: Path, tools: Tools, rec: dict) -> None:
    cubins = kept_cubins(dump)
    rec["cubins"] = [p.name for p in cubins]
    if not cubins:
        raise MeasurementError(f"no cubin in {dump}: the compile kept none (CUTE_DSL_KEEP=cubin had no effect, "
                               "or the variant did not compile)")
    if tools.cuobjdump is None and tools.nvdisasm is None:
        raise MeasurementError(f"neither cuobjdump nor nvdisasm was found (looked in {', '.join(tools.looked)})")
    functions: list[tuple[sass_mod.SassFunction, Path]] = []
    dumps: dict[Path, str] = {}
    resources: dict[str, dict] = {}
    for cubin in cubins:
        if tools.cuobjdump:
            code, text = run_tool([tools.cuobjdump, "--dump-sass", str(cubin)], None, 300)
        else:
            code, text = run_tool([tools.nvdisasm, str(cubin)], None, 300)
        if code != 0:  # what the tool said of its failure follows what it printed of the dump: the end is kept
            raise MeasurementError(f"disassembling {cubin.name} failed (exit code {code}): {text.strip()[-400:]}")
        dumps[cubin] = text
        functions += [(f, cubin) for f in sass_mod.parse_sass(text)]
        if tools.cuobjdump:
            code, text = run_tool([tools.cuobjdump, "--dump-resource-usage", str(cubin)], None, 300)
            if code == 0:
                resources.update(sass_mod.parse_resource_usage(text))
            else:
                rec["errors"]["resources"] = f"cuobjdump --dump-resource-usage failed: {text.strip()[:300]}"
    # a pattern the user gave is taken at its word: the largest function in its place would be audited under
    # a name it does not have
    fn, how = sass_mod.pick_kernel([f for f, _ in functions], opts.kernel_regex, fallback=not opts.kernel_regex_given)
    rec["functions"] = [{"name": f.name, "instructions": len(f), "cubin": c.name} for f, c in functions]
    if fn is None:
        names = sorted({f.name for f, _ in functions})
        raise MeasurementError(f"{how} in the SASS of {', '.join(p.name for p in cubins)}"
                               + (f" (its functions: {', '.join(names)})" if names else ""))
    cubin = next(c for f, c in functions if f is fn)
    _write_sass(session, variant, dumps[cubin])
    rec.update(kernel=fn.name, kernel_choice=how, kernel_cubin=cubin.name,
               families=sass_mod.count_families(fn), opcodes=sass_mod.count_opcodes(fn),
               resources=resources.get(fn.name), dependency_depth=sass_mod.dependency_depth(fn))
    if fn.name not in resources and tools.cuobjdump:
        rec["errors"].setdefault("resources", f"no resource-usage line for {fn.name}")


def _write_sass(session: Session, variant: str, text: str) -> None:
    (session.path / "sass").mkdir(exist_ok=True)
    data = text.encode()
    if len(data) > SASS_GZIP_ABOVE_BYTES:
        tmp = session.path / "sass" / f".{variant}.sass.gz.tmp"
        with gzip.open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, session.path / "sass" / f"{variant}.sass.gz")
    else:
        session.write_text(f"sass/{variant}.sass", text)
