#!/usr/bin/env bash
# Configures and builds ps in build/ (Release, -j2). Used by test.sh and quickstart.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" -j"${JOBS:-2}"
