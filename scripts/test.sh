#!/usr/bin/env bash
# Installs missing dependencies, builds, and runs every test (unit, integration, consumer).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest -j2 --output-on-failure --timeout 900
