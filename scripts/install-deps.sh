#!/usr/bin/env bash
# install-deps.sh - install exactly the Debian 12 packages grit needs to build,
# test and benchmark. Idempotent: installs only what is missing, and says what.
# Run as root (or with sudo available).
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config   # compiler, build
  libopenblas-openmp-dev             # sgemm (OpenMP build, shares our thread pool)
  libjansson-dev                     # JSON configs
  libxxhash-dev                      # digests (grit health)
  python3 python3-torch python3-numpy # the PyTorch reference model (tests, bench)
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#PKGS[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "deps: need root to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "deps: installed ${missing[*]}"
