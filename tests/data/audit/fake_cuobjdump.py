"""Stand-in for cuobjdump in tests (hand-made): the "cubin" is a text file `FAKE-CUBIN variant=<name>`;
--dump-sass prints <name>.sass from this folder, --dump-resource-usage prints resource-usage.txt.
FAKE_CUOBJDUMP_MODE=crash dies halfway through the SASS (exit code 2, after printing its first half);
FAKE_CUOBJDUMP_MODE=noresources leaves the attention kernel out of the resource usage (only the fill kernel's)."""
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
args = sys.argv[1:]
if "--version" in args:
    print("cuobjdump: NVIDIA (R) CUDA Object Dump Tool (fake for tests)")
    sys.exit(0)
cubin = Path(args[-1]).read_text()
if not cubin.startswith("FAKE-CUBIN variant="):
    print(f"cuobjdump fatal   : Could not open input file '{args[-1]}'", file=sys.stderr)
    sys.exit(1)
variant = cubin.split("=", 1)[1].strip()
mode = os.environ.get("FAKE_CUOBJDUMP_MODE", "")
if "--dump-sass" in args:
    sass = (HERE / f"{variant}.sass").read_text()
    if mode == "crash":
        sys.stdout.write(sass[:len(sass) // 2])
        print("cuobjdump fatal   : Internal error (fake crash)", file=sys.stderr)
        sys.exit(2)
    sys.stdout.write(sass)
elif "--dump-resource-usage" in args:
    usage = (HERE / "resource-usage.txt").read_text()
    if mode == "noresources":  # the usage stops before the attention kernel's Function line
        usage = usage[:usage.index(" Function kernel_cutlass_kernel_flash_attn")]
    sys.stdout.write(usage)
else:
    sys.exit(2)
