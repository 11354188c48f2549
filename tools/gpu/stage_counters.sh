#!/usr/bin/env bash
# The wheels tools/gpu/audit_counters.sh installs on the offline GPU host (Python 3.12, x86-64), into .whl/
# (git-ignored; carry it). Pinned to what was read and checked for issue 20:
# - ncu-report 2025.3.1: NVIDIA's report reader, the release of the host's Nsight Compute (2025.3.1);
# - nsight-python 0.9.6: the newest release that drives ncu 2025.3.1 (1.0.0 and later need 2026.2.1), with what
#   it imports: nvtx, deepdiff (orderly-set, cachebox), nvidia-ml-py, and matplotlib with its own dependencies
#   (the host's numpy and pandas serve; they are not staged). About 41 MB.
# Run from the project root: bash tools/gpu/stage_counters.sh
set -euo pipefail
DEST=.whl
PKGS=(
  ncu-report==2025.3.1 nsight-python==0.9.6 nvtx==0.2.17 deepdiff==9.1.0 orderly-set==5.5.0 cachebox==5.2.3
  nvidia-ml-py==13.615.71 matplotlib==3.11.2 contourpy==1.4.0 cycler==0.12.1 fonttools==4.68.0
  kiwisolver==1.5.1 pillow==13.0.0 pyparsing==3.3.3 python-dateutil==4.0.0 packaging==26.4
)
mkdir -p "$DEST"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_25_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$DEST" "${PKGS[@]}"
ls -1 "$DEST"
du -sh "$DEST"
