#!/usr/bin/env bash
# obs_prometheus.sh GRIT PYTHON FAKE_NVML - a real Prometheus (Debian's /usr/bin/prometheus, temp
# config and data dir, loopback, free ports) scrapes grit's /metrics, served by
# grit dashboard for a run that had an injected node failure (the same code serves it
# live from grit launch); a query through Prometheus's HTTP API returns the run's last
# loss from metrics.jsonl, and the cordoned node's state. Then grit launch's own live
# /metrics is read while a job trains, on a node with four (fake, tests/fake/fake_nvml.c)
# GPUs drawing 250 W each: the power shown includes them and names NVML as a source, and
# it is the workers' measurement (grit_node_energy_joules labelled with this machine's
# boot_id and a worker's node), with the machine counted once (grit_energy_hosts 1)
# although the supervisor samples the same machine.
set -euo pipefail
grit=$1 py=$2 fake_nvml=$3
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

# live: grit launch serves /metrics while the job trains, with per-node timing from the
# heartbeats; the job is long enough (300 steps) to be caught running
sed 's/"total_steps": 24/"total_steps": 300/' "$tmp/job.json" > "$tmp/long.json"
lport=$(free_port)
GRIT_NVML_LIB=$fake_nvml FAKE_NVML_GPUS=4 FAKE_NVML_POWER_MW=250000 \
  "$grit" launch --nodes 2 --spares 1 --run "$tmp/live" --straggler-factor 0 --dashboard-port "$lport" \
  --quiet -- "$grit" train "$tmp/long.json" --run-dir "$tmp/live" --quiet > "$tmp/live.out" 2>&1 &
lpid=$!
pids+=($lpid)
boot=$(cat /proc/sys/kernel/random/boot_id)
seen=""
for _ in $(seq 1 300); do
  curl -sf "http://127.0.0.1:$lport/metrics" > "$tmp/live.txt" 2>/dev/null &&
    grep -q '^grit_node_step_seconds{node="node1"}' "$tmp/live.txt" &&
    grep -q '^grit_run_finished 0' "$tmp/live.txt" &&
    grep -q '^grit_energy_source_info{source="\(RAPL + \)\?NVML (4 GPUs)",.*nvml="1"} 1' "$tmp/live.txt" &&
    grep -q '^grit_energy_gpus 4' "$tmp/live.txt" &&
    grep -q '^grit_energy_hosts 1$' "$tmp/live.txt" &&
    grep -q "^grit_node_energy_joules{host=\"$boot\",node=\"node[0-9]\"} [0-9]" "$tmp/live.txt" &&
    ! grep -q 'node="supervisor"' "$tmp/live.txt" && { seen=1; break; }
  kill -0 $lpid 2>/dev/null || break
  sleep 0.1
done
[ -n "$seen" ] && echo "ok   live /metrics from grit launch: step $(grep '^grit_step ' "$tmp/live.txt" | cut -d' ' -f2), per-node step times, GPU power ($(grep '^grit_energy_source_info' "$tmp/live.txt"))" ||
  fail "grit launch's live /metrics never showed a running job with node timing and 4 NVML GPUs measured by its workers on one host: $(tail -3 "$tmp/live.out"; grep -E '^grit_(energy|power|node_energy)' "$tmp/live.txt")"
watts=$(grep '^grit_power_watts ' "$tmp/live.txt" | cut -d' ' -f2)
"$py" -c "import sys; sys.exit(0 if 900 <= float('${watts:-0}') else 1)" &&
  echo "ok   live power $watts W includes 4 GPUs x 250 W" ||
  fail "live grit_power_watts '$watts': expected at least the GPUs' 1000 W (less timing slack)"
kill $lpid 2>/dev/null || true # a killed supervisor takes its job down with it (PDEATHSIG)
wait $lpid 2>/dev/null || true
for _ in $(seq 1 100); do pgrep -f -- "--run-dir $tmp/live" >/dev/null || break; sleep 0.1; done
pgrep -f -- "--run-dir $tmp/live" >/dev/null && fail "the job outlived its killed supervisor"
grep -q "http://127.0.0.1:$lport/" "$tmp/live/dashboard.url" || fail "dashboard.url: $(cat "$tmp/live/dashboard.url")"
[ $fails -eq 0 ] && echo "obs_prometheus: all checks passed"
exit $((fails > 0))
