#!/usr/bin/env bash
# A second English corpus for `softbench fidelity --corpus FILE`: the King James Bible (31,102 verses) as plain
# UTF-8 text, from Debian's bible-kjv and bible-kjv-text, unpacked without installing them (no root needed).
# Each chapter becomes one paragraph (its verses joined, verse numbers dropped, so that the model reads prose and
# not references), chapters separated by blank lines. Run here:  bash tools/kjv_text.sh OUT.txt
set -euo pipefail
out=${1:?usage: kjv_text.sh OUT.txt}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
( cd "$tmp" && { apt-get download bible-kjv bible-kjv-text >/dev/null 2>&1 \
  || { apt-get update -qq >/dev/null 2>&1 && apt-get download bible-kjv bible-kjv-text >/dev/null; }; } ) \
  || { echo "kjv_text.sh: Debian's bible-kjv could not be fetched" >&2; exit 1; }
for d in "$tmp"/*.deb; do dpkg-deb -x "$d" "$tmp/root"; done
"$tmp/root/usr/bin/bible" -p "$tmp/root/usr/lib" -f 'gen1:1-rev22:21' > "$tmp/verses.txt"
n=$(wc -l < "$tmp/verses.txt")
[ "$n" -eq 31102 ] || { echo "kjv_text.sh: expected 31102 verses, bible printed $n lines" >&2; exit 1; }
# "Ge1:1 In the beginning ..." -> chapter key "Ge1", text after the reference
awk '{ split($1, r, ":"); sub(/^[^ ]+ /, ""); if (r[1] != key && NR > 1) printf "\n\n"; else if (NR > 1) printf " ";
       key = r[1]; printf "%s", $0 } END { printf "\n" }' "$tmp/verses.txt" > "$out.part"
mv "$out.part" "$out"
echo "kjv_text.sh: $(wc -c < "$out") bytes, $(grep -c . "$out") chapters, sha256 $(sha256sum "$out" | cut -c1-16)"
