#!/usr/bin/env bash
# Redraws the figures of docs/consistency.md: installs python3-matplotlib (Debian) if missing,
# builds ps_sim, runs the simulations (about 15 s on 2 cores) and writes docs/img/.
# Extra arguments go to scripts/plot_consistency.py (e.g. --quick, --out DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh python3-matplotlib
./scripts/build.sh >/dev/null
# Debian's interpreter, where python3-matplotlib lives (a python3 earlier on PATH may not see it).
exec /usr/bin/python3 scripts/plot_consistency.py --sim build/ps_sim "$@"
