#!/usr/bin/env bash
# Pack the sessions a device call wrote into $OUT, without the large re-creatable files (gates readbacks *.pt,
# Nsight reports): bash tools/gpu/pack.sh SESSIONS_DIR [NAME]. A call brings back at most 8 files from $OUT.
set -euo pipefail
DIR=${1:?sessions folder}
NAME=${2:-sessions}
: "${OUT:?run on the device, where \$OUT is set}"
tar czf "$OUT/$NAME.tgz" --exclude='*.pt' --exclude='*.nsys-rep' --exclude='*.sqlite' -C "$DIR" .
echo "packed $(ls "$DIR" | wc -l) entries of $DIR into $OUT/$NAME.tgz ($(du -h "$OUT/$NAME.tgz" | cut -f1))"
