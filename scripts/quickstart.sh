#!/usr/bin/env bash
# Installs missing dependencies, builds, launches a local cluster (1 scheduler, 2 servers,
# 2 workers) and runs the demo job: every worker pushes 20 rounds of sparse int64 updates,
# then pulls every key and checks each value against the exact sum.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== 1/3 dependencies"
./scripts/install-deps.sh
echo "== 2/3 build"
./scripts/build.sh
echo "== 3/3 job: tracker/ps-launch -s 2 -w 2"
python3 tracker/ps-launch -s 2 -w 2 --timeout 600 -- build/tests/kv_exact_job --scenario sum \
  --universe 1000000 --keys 100000 --rounds 20
echo "quickstart: each [worker N] OK line above means every pulled value equalled the exact sum"
