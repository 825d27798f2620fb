# s3_lib.sh GRIT - setup and helpers for the S3 checkpoint tests (sourced).
# Starts a private S3 server (scripts/s3-local.sh: Swift's S3 API on free loopback
# ports) and exports its AWS_* variables; on exit, whatever happens, every process
# the test started is killed by its PID and the scratch directory removed.
# Sets grit, root, tmp, S3 (the server directory); defines fail, finish, awsc (Debian's
# awscli against the server), s3cfg NAME [SED] (a config checkpointing to s3://ckpt/NAME),
# run_reference (the uninterrupted run with local checkpoints) and same_as_reference.
grit=$1
for need in swift-proxy-server swift-object-server swift-ring-builder memcached /usr/bin/aws; do
  command -v "$need" >/dev/null || { echo "SKIP: $need not installed (scripts/install-deps.sh)"; exit 77; }
done
"$grit" s3 --help >/dev/null 2>&1 || { echo "SKIP: grit built without S3 (libcurl4-openssl-dev, libssl-dev)"; exit 77; }
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
S3=""
pids=()
s3_cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -n "$S3" ] && "$root/scripts/s3-local.sh" stop "$S3" >/dev/null 2>&1
  rm -rf "$tmp"
}
trap s3_cleanup EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
finish() {
  if [ "$fails" -eq 0 ]; then echo "$1: all cases passed"; else echo "$1: $fails failure(s)"; fi
  [ "$fails" -eq 0 ]
}
metrics_core() { sed -E 's/,"tokens_per_s".*//' "$1"; }

S3=$("$root/scripts/s3-local.sh" start "$tmp/s3")
# shellcheck disable=SC1091
. "$S3/env"
# awscli: its own config (multipart above 5 MiB, like ours), no user files
printf '[default]\ns3 =\n  multipart_threshold = 5MB\n  multipart_chunksize = 5MB\n' > "$tmp/aws.cfg"
awsc() {
  AWS_CONFIG_FILE="$tmp/aws.cfg" AWS_SHARED_CREDENTIALS_FILE=/dev/null \
    /usr/bin/aws --endpoint-url "$AWS_ENDPOINT_URL" "$@"
}

# s3cfg NAME [SED-EXPR]: path of a config checkpointing to s3://ckpt/NAME
s3cfg() {
  sed "s#PREFIX#$1#; ${2:-}" "$root/tests/configs/ckpt_s3.json" > "$tmp/$1.json"
  echo "$tmp/$1.json"
}

run_reference() {
  sed 's#"dir": "s3://ckpt/PREFIX",##' "$root/tests/configs/ckpt_s3.json" > "$tmp/ref.json"
  "$grit" train "$tmp/ref.json" --run-dir "$tmp/ref" --quiet
}

# same_as_reference RUN_DIR NAME: final weights and loss curve equal the reference's
same_as_reference() {
  cmp -s "$tmp/ref/model.safetensors" "$1/model.safetensors" ||
    fail "$2: final weights differ from the uninterrupted run"
  diff -q <(metrics_core "$tmp/ref/metrics.jsonl") <(metrics_core "$1/metrics.jsonl") >/dev/null ||
    fail "$2: metrics.jsonl differs from the uninterrupted run"
}
