#!/usr/bin/env bash
# Installs the Debian packages ps needs, and only those that are missing. Extra package names
# given as arguments are added (scripts/consistency-plots.sh asks for python3-matplotlib).
set -euo pipefail
PACKAGES=(cmake g++ make pkg-config python3 ccache
  libzmq3-dev cppzmq-dev libucx-dev libmicrohttpd-dev libprotobuf-dev protobuf-compiler libsnappy-dev libeigen3-dev
  libgflags-dev libgoogle-glog-dev libgtest-dev libgmock-dev libbenchmark-dev "$@")
missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then SUDO="sudo"; else
    echo "install-deps: missing ${missing[*]} and not root (no sudo)" >&2
    exit 1
  fi
fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
