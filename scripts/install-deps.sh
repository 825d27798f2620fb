#!/usr/bin/env bash
# install-deps.sh - install exactly the Debian 12 packages grit needs to build,
# test and benchmark. Idempotent: installs only what is missing, and says what.
# Run as root (or with sudo available).
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config   # compiler, build
  libopenblas-openmp-dev             # sgemm (OpenMP build, shares our thread pool)
  libjansson-dev                     # JSON configs
  libopenmpi-dev openmpi-bin         # data-parallel training (mpirun)
  libutf8proc-dev libxxhash-dev      # tokenizer: Unicode categories/NFC, hashing
  nodejs                             # reference tokenizers (tests/data/package.json)
  debian-handbook installation-guide-amd64 manpages-de manpages-fr manpages-es manpages-ru manpages-ja manpages-zh  # tokenizer parity corpus (tests/tok/make_corpus.py)
  python3 python3-torch python3-numpy # the PyTorch reference model (tests, bench)
  slurm-wlm slurmctld slurmd slurm-client munge libslurm-dev libpmix-dev # Slurm: spank_grit.so, --backend slurm, scripts/slurm-local-cluster.sh
)
# npm ships inside nodesource's nodejs; Debian packages it separately.
command -v npm >/dev/null 2>&1 || PKGS+=(npm)

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
