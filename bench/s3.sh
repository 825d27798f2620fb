#!/usr/bin/env bash
# s3.sh - S3 checkpoint upload / restore throughput against a real S3 server on loopback
# (scripts/s3-local.sh: OpenStack Swift's S3 API, proxy and object server with 2 workers
# each), in one run:
#   grit        multipart upload (8 MiB parts, 16 in flight) and parallel ranged GET
#   awscli      Debian's /usr/bin/aws s3 cp, its defaults (8 MB parts, 10 in flight)
#   grit c=4    the same with 4 in flight
#   single      one PUT and one GET on one connection (grit s3 --concurrency 1, one part)
# The object is the largest file of a pythia-160m-shape checkpoint (optimizer.safetensors,
# 1298 MB: 2 x 162.3M float32 moments) cut to SIZE_MB (default 384) to fit the time on a
# shared 2-core machine; SIZE_MB=1298 for the full file. Each transfer runs REPS times
# (default 2); the best wall time is reported, command start-up and local file I/O
# included for every client alike. CPU seconds of the client and of the server's
# processes during each transfer say which side saturates.
# Override: SIZE_MB, REPS, WORKERS (proxy and object server workers, default 2), DIR.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
grit=${GRIT:-$root/build/grit}
SIZE_MB=${SIZE_MB:-384}
REPS=${REPS:-2}
tmp=$(mktemp -d "${DIR:-/tmp}/grit-s3-bench.XXXXXX")
S3=""
trap '[ -n "$S3" ] && "$root/scripts/s3-local.sh" stop "$S3" >/dev/null 2>&1; rm -rf "$tmp"' EXIT
S3=$(S3_LOCAL_WORKERS=${WORKERS:-2} "$root/scripts/s3-local.sh" start "$tmp/s3")
. "$S3/env"
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
aws=(/usr/bin/aws --endpoint-url "$AWS_ENDPOINT_URL")

echo "bench: load average before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores (shared machine)"
echo "bench: $SIZE_MB MB of random bytes (pythia-160m optimizer.safetensors is 1298 MB)"
head -c $((SIZE_MB * 1000000)) /dev/urandom > "$tmp/obj"

# CPU seconds (user+sys) of all processes of the server (the ones with a PID file and
# their children: the proxy's workers)
server_cpu() {
  local pids total=0 t
  pids=$(cat "$S3"/run/*.pid)
  for p in $pids; do pids="$pids $(pgrep -P "$p" || true)"; done
  for p in $pids; do
    t=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)
    total=$((total + t))
  done
  echo "$total"
}
hz=$(getconf CLK_TCK)

# measure NAME CMD...: best of REPS; prints MB/s, client and server CPU per wall second
measure() {
  local name=$1; shift
  local best="" bc="" bs=""
  for _ in $(seq "$REPS"); do
    rm -f "$tmp/back"
    local s0 t0 t1 s1
    s0=$(server_cpu); t0=$(date +%s.%N)
    /usr/bin/time -f "%U %S" -o "$tmp/time" "$@" >/dev/null
    t1=$(date +%s.%N); s1=$(server_cpu)
    local w c s
    w=$(echo "$t1 - $t0" | bc -l)
    c=$(awk '{print $1 + $2}' "$tmp/time")
    s=$(echo "($s1 - $s0) / $hz" | bc -l)
    if [ -z "$best" ] || [ "$(echo "$w < $best" | bc -l)" = 1 ]; then best=$w; bc=$c; bs=$s; fi
  done
  if [[ $name == *get* ]]; then cmp -s "$tmp/obj" "$tmp/back" || { echo "bench: $name: downloaded bytes differ" >&2; exit 1; }; fi
  printf '  %-14s %8.1f MB/s  %6.2f s   client CPU %4.2f cores   server CPU %4.2f cores\n' \
    "$name" "$(echo "$SIZE_MB / $best" | bc -l)" "$best" "$(echo "$bc / $best" | bc -l)" \
    "$(echo "$bs / $best" | bc -l)"
}

echo "bench: upload (best of $REPS)"
measure "grit put" "$grit" s3 put "$tmp/obj" s3://ckpt/grit.bin
measure "awscli put" "${aws[@]}" s3 cp "$tmp/obj" s3://ckpt/aws.bin --quiet
measure "grit put c=4" "$grit" s3 put "$tmp/obj" s3://ckpt/grit4.bin --concurrency 4
measure "single put" "$grit" s3 put "$tmp/obj" s3://ckpt/single.bin --concurrency 1 --part-mib 5120
echo "bench: restore (best of $REPS)"
measure "grit get" "$grit" s3 get s3://ckpt/grit.bin "$tmp/back"
measure "grit get c=4" "$grit" s3 get s3://ckpt/grit.bin "$tmp/back" --concurrency 4
measure "awscli get" "${aws[@]}" s3 cp s3://ckpt/aws.bin "$tmp/back" --quiet
measure "single get" "$grit" s3 get s3://ckpt/single.bin "$tmp/back" --concurrency 1 --part-mib 5120
echo "bench: $(nproc) cores on this machine; a side whose CPU is near the core count (or"
echo "       near 1 core per server process) is the one that saturates"
