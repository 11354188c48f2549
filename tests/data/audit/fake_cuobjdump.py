"""Stand-in for cuobjdump in tests (hand-made): the "cubin" is a text file `FAKE-CUBIN variant=<name>`;
--dump-sass prints <name>.sass from this folder, --dump-resource-usage prints resource-usage.txt."""
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
if "--dump-sass" in args:
    sys.stdout.write((HERE / f"{variant}.sass").read_text())
elif "--dump-resource-usage" in args:
    sys.stdout.write((HERE / "resource-usage.txt").read_text())
else:
    sys.exit(2)
