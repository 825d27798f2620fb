#!/usr/bin/env bash
# obs_prometheus.sh GRIT PYTHON - a real Prometheus (Debian's /usr/bin/prometheus, temp
# config and data dir, loopback, free ports) scrapes grit's /metrics, served by
# grit dashboard for a run that had an injected node failure (the same code serves it
# live from grit launch); a query through Prometheus's HTTP API returns the run's last
# loss from metrics.jsonl, and the cordoned node's state.
set -euo pipefail
grit=$1 py=$2
here=$(cd "$(dirname "$0")" && pwd)
source "$here/obs_lib.sh"
prom=$(command -v prometheus || true)
[ -n "$prom" ] || { echo "FAIL: prometheus not found (make deps installs Debian's prometheus)"; exit 1; }

obs_run "$tmp/run"
serve "$tmp/run" "$tmp/port"
port=$(cat "$tmp/port")
curl -sf "http://127.0.0.1:$port/metrics" > "$tmp/metrics.txt" || fail "GET /metrics failed"
grep -q '^grit_loss ' "$tmp/metrics.txt" || fail "/metrics lacks grit_loss: $(head -5 "$tmp/metrics.txt")"
ctype=$(curl -sI "http://127.0.0.1:$port/metrics" | tr -d '\r' | grep -i '^content-type:' || true)
grep -q 'version=0.0.4' <<<"$ctype" || fail "content type '$ctype' lacks version=0.0.4"

pport=$(free_port)
cat > "$tmp/prometheus.yml" <<YML
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: grit
    static_configs: [{targets: ["127.0.0.1:$port"]}]
YML
"$prom" --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/tsdb" \
  --web.listen-address="127.0.0.1:$pport" > "$tmp/prometheus.log" 2>&1 &
pids+=($!)

want=$(tail -n 1 "$tmp/run/metrics.jsonl" | "$py" -c 'import json,sys; print(repr(json.loads(sys.stdin.read())["loss"]))')
query() { curl -sf "http://127.0.0.1:$pport/api/v1/query" --data-urlencode "query=$1" 2>/dev/null || true; }
got=""
for _ in $(seq 1 150); do # Prometheus starts, then scrapes every second
  got=$(query grit_loss | "$py" -c 'import json,sys
try:
    r = json.loads(sys.stdin.read())["data"]["result"]
    print(repr(float(r[0]["value"][1])) if r else "")
except Exception:
    print("")')
  [ -n "$got" ] && break
  sleep 0.2
done
if [ "$got" = "$want" ]; then
  echo "ok   Prometheus query grit_loss = $got, the last loss of metrics.jsonl"
else
  fail "Prometheus returned '$got' for grit_loss, metrics.jsonl says $want ($(tail -3 "$tmp/prometheus.log"))"
fi
cord=$(query 'grit_node_state{node="node1",state="cordoned"}' | "$py" -c 'import json,sys
r = json.loads(sys.stdin.read() or "{}").get("data", {}).get("result", [])
print(r[0]["value"][1] if r else "none")')
[ "$cord" = 1 ] && echo "ok   Prometheus: node1 cordoned" || fail "node1 cordoned state via Prometheus: '$cord'"
up=$(query 'up{job="grit"}' | "$py" -c 'import json,sys
r = json.loads(sys.stdin.read() or "{}").get("data", {}).get("result", [])
print(r[0]["value"][1] if r else "none")')
[ "$up" = 1 ] || fail "Prometheus reports the grit target as up=$up"
[ $fails -eq 0 ] && echo "obs_prometheus: all checks passed"
exit $((fails > 0))
