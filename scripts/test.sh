#!/usr/bin/env bash
# Installs missing dependencies, builds, and runs every test (unit, integration, consumer).
set -euo pipefail
cd "$(dirname "$0")/.."
# The cluster tests (tests/cluster) start real launchers: sshd, Open MPI, MPICH, Slurm with
# munge; rsync for --sync-dst-dir and iproute2 for the simulated hosts.
# dpkg-dev: dpkg-shlibdeps for the Debian packages (consumer.deb_packages). gdb: the stacks of
# a hung job (PS_LAUNCH_STACKS_ON_TIMEOUT).
./scripts/install-deps.sh openssh-server openssh-client rsync openmpi-bin mpich slurm-wlm dpkg-dev \
  munge iproute2 python3-prometheus-client chromium gdb
./scripts/build.sh
cd "${BUILD_DIR:-build}"
# A job that hangs until its launcher's --timeout prints every thread's stack first (gdb).
export PS_LAUNCH_STACKS_ON_TIMEOUT=1
ctest -j2 --output-on-failure --timeout 900
