#!/usr/bin/env bash
# Configures and builds ps in build/ (Release, -j2). Used by test.sh and quickstart.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
# ccache (when present) hashes paths under the checkout as relative ones: a second clone of the
# same commit builds from the cache.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" -j"${JOBS:-2}"
