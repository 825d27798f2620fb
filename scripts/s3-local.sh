#!/usr/bin/env bash
# s3-local.sh - a real S3-compatible server on loopback for tests and benchmarks:
# OpenStack Swift (Debian packages) with its s3api middleware, single node, one replica,
# everything under one temporary directory, every port chosen free at start.
#
#   s3-local.sh start [DIR]   start; prints DIR (created with mktemp if not given).
#                             DIR/env holds the exports below; bucket "ckpt" exists.
#   s3-local.sh env DIR       print the exports: AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
#                             AWS_SECRET_ACCESS_KEY, AWS_REGION (us-east-1, path-style)
#   s3-local.sh proxy DIR     (re)start the proxy server of DIR if it is not running
#                             (tests kill it by the PID in DIR/run/proxy.pid)
#   s3-local.sh stop DIR      kill every server started for DIR by its PID, remove DIR
#
# Credentials are Swift tempauth's test account: access key "test:tester" (it contains
# ':'), secret "testing". Signatures (SigV4) are checked: a wrong secret gets 403.
# S3_LOCAL_WORKERS sets the worker processes of the proxy and object servers (default
# 0: one process each, so the PID in DIR/run/proxy.pid is the server itself).
# Everything binds 127.0.0.1 only. Needs: swift swift-proxy swift-account
# swift-container swift-object python3-swift memcached (scripts/install-deps.sh).
set -euo pipefail

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

write_conf() { # NAME PORT EXTRA...
  local name=$1 port=$2; shift 2
  {
    echo "[DEFAULT]"
    echo "devices = $D/node"
    echo "mount_check = false"
    echo "bind_ip = 127.0.0.1"
    echo "bind_port = $port"
    echo "user = $(id -un)"
    echo "swift_dir = $D"
    echo "log_name = $name"
    echo "log_udp_host = "
    printf '%s\n' "$@"
  } > "$D/$name.conf"
}

alive() { # PID: running (a killed server whose parent has not reaped it yet is not)
  local st
  st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "${st#Z}" = "$st" ]
}

stop() {
  local D=$1 pid
  [ -d "$D/run" ] || { echo "s3-local: $D: not a server directory" >&2; return 1; }
  for f in "$D"/run/*.pid; do
    [ -e "$f" ] || continue
    pid=$(cat "$f")
    kill "$pid" 2>/dev/null || true
  done
  # wait (bounded) for them to go, then force
  for _ in $(seq 50); do
    local alive=0
    for f in "$D"/run/*.pid; do [ -e "$f" ] && alive "$(cat "$f")" && alive=1; done
    [ $alive -eq 0 ] && break
    sleep 0.1
  done
  for f in "$D"/run/*.pid; do [ -e "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || true; done
  rm -rf "$D"
}

start_proxy() { # DIR
  swift-proxy-server "$1/proxy.conf" >> "$1/log/proxy.log" 2>&1 &
  echo $! > "$1/run/proxy.pid"
}

wait_healthy() { # DIR PORT: 0 when the proxy answers within 30 s
  for _ in $(seq 150); do
    curl -sf "http://127.0.0.1:$2/healthcheck" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  return 1
}

start() {
  D=${1:-$(mktemp -d /tmp/grit-s3.XXXXXX)}
  mkdir -p "$D/node/d1" "$D/run" "$D/log"
  local pa pc po pp pm
  pa=$(free_port); pc=$(free_port); po=$(free_port); pp=$(free_port); pm=$(free_port)
  write_conf account "$pa" "workers = 0" "[pipeline:main]" "pipeline = account-server" \
    "[app:account-server]" "use = egg:swift#account"
  write_conf container "$pc" "workers = 0" "[pipeline:main]" "pipeline = container-server" \
    "[app:container-server]" "use = egg:swift#container"
  write_conf object "$po" "workers = ${S3_LOCAL_WORKERS:-0}" "[pipeline:main]" "pipeline = object-server" \
    "[app:object-server]" "use = egg:swift#object"
  write_conf proxy "$pp" "workers = ${S3_LOCAL_WORKERS:-0}" \
    "[pipeline:main]" \
    "pipeline = catch_errors gatekeeper healthcheck proxy-logging cache listing_formats s3api tempauth copy slo dlo proxy-logging proxy-server" \
    "[app:proxy-server]" "use = egg:swift#proxy" "account_autocreate = true" \
    "[filter:s3api]" "use = egg:swift#s3api" "location = us-east-1" \
    "[filter:tempauth]" "use = egg:swift#tempauth" "user_test_tester = testing .admin" \
    "[filter:catch_errors]" "use = egg:swift#catch_errors" \
    "[filter:gatekeeper]" "use = egg:swift#gatekeeper" \
    "[filter:healthcheck]" "use = egg:swift#healthcheck" \
    "[filter:proxy-logging]" "use = egg:swift#proxy_logging" \
    "[filter:cache]" "use = egg:swift#memcache" "memcache_servers = 127.0.0.1:$pm" \
    "[filter:listing_formats]" "use = egg:swift#listing_formats" \
    "[filter:copy]" "use = egg:swift#copy" \
    "[filter:slo]" "use = egg:swift#slo" \
    "[filter:dlo]" "use = egg:swift#dlo"
  (
    cd "$D"
    for r in account:$pa container:$pc object:$po; do
      swift-ring-builder "${r%%:*}.builder" create 8 1 1
      swift-ring-builder "${r%%:*}.builder" add "r1z1-127.0.0.1:${r##*:}/d1" 100
      swift-ring-builder "${r%%:*}.builder" rebalance || true
    done
  ) > "$D/log/rings.log" 2>&1
  local mu=""; [ "$(id -u)" -eq 0 ] && mu="-u root"
  # shellcheck disable=SC2086
  memcached $mu -l 127.0.0.1 -p "$pm" -U 0 -m 64 > "$D/log/memcached.log" 2>&1 &
  echo $! > "$D/run/memcached.pid"
  for s in account container object; do
    "swift-$s-server" "$D/$s.conf" > "$D/log/$s.log" 2>&1 &
    echo $! > "$D/run/$s.pid"
  done
  start_proxy "$D"
  cat > "$D/env" <<ENV
export AWS_ENDPOINT_URL=http://127.0.0.1:$pp
export AWS_ACCESS_KEY_ID=test:tester
export AWS_SECRET_ACCESS_KEY=testing
export AWS_REGION=us-east-1
export AWS_DEFAULT_REGION=us-east-1
ENV
  if ! wait_healthy "$D" "$pp"; then
    echo "s3-local: the proxy did not come up on 127.0.0.1:$pp; logs:" >&2
    tail -n 20 "$D"/log/*.log >&2 || true
    stop "$D"; exit 1
  fi
  # the bucket; the account/container servers may need a moment after the proxy
  local made=0
  for _ in $(seq 50); do
    if (. "$D/env"; AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null \
        /usr/bin/aws --endpoint-url "$AWS_ENDPOINT_URL" s3 mb s3://ckpt) >> "$D/log/mb.log" 2>&1; then
      made=1; break
    fi
    sleep 0.2
  done
  if [ $made -eq 0 ]; then
    echo "s3-local: could not create bucket ckpt; logs:" >&2
    tail -n 20 "$D"/log/*.log >&2 || true
    stop "$D"; exit 1
  fi
  echo "$D"
}

case "${1:-}" in
  start) start "${2:-}" ;;
  env) [ -f "${2:-}/env" ] || { echo "s3-local: ${2:-}: no env file" >&2; exit 1; }; cat "$2/env" ;;
  proxy)
    D=${2:-}; [ -f "$D/proxy.conf" ] || { echo "s3-local: ${D}: not a server directory" >&2; exit 1; }
    port=$(sed -n 's/^bind_port = //p' "$D/proxy.conf")
    if ! curl -sf "http://127.0.0.1:$port/healthcheck" >/dev/null 2>&1; then
      pid=$(cat "$D/run/proxy.pid")
      for _ in $(seq 50); do alive "$pid" || break; sleep 0.1; done  # a kill in progress
      alive "$pid" || start_proxy "$D"
    fi
    wait_healthy "$D" "$port" || { echo "s3-local: the proxy did not come back" >&2; exit 1; } ;;
  stop) [ -n "${2:-}" ] || { echo "usage: s3-local.sh stop DIR" >&2; exit 2; }; stop "$2" ;;
  -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) echo "usage: s3-local.sh start [DIR] | env DIR | stop DIR" >&2; exit 2 ;;
esac
