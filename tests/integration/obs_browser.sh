#!/usr/bin/env bash
# obs_browser.sh GRIT PYTHON ARTIFACT_DIR - headless Debian Chromium (driven by
# playwright-core, tests/browser/dashboard.mjs) loads the dashboard of a run that had a
# node killed, checks what it shows and saves ARTIFACT_DIR/dashboard.png. Also checks
# that without uPlot the server says so (503 with the fix) instead of a blank page.
set -euo pipefail
grit=$1 py=$2 art=$3
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
source "$here/obs_lib.sh"
[ -x /usr/bin/chromium ] || { echo "FAIL: /usr/bin/chromium not found (make deps)"; exit 1; }
command -v node >/dev/null || { echo "FAIL: node not found (make deps)"; exit 1; }
bash "$root/scripts/npm-once.sh" "$root/web" obs_browser playwright-core/package.json uplot/package.json
mkdir -p "$art"
obs_run "$tmp/run"
serve "$tmp/run" "$tmp/port"
steps=$(wc -l < "$tmp/run/metrics.jsonl")
node "$root/tests/browser/dashboard.mjs" "http://127.0.0.1:$(cat "$tmp/port")/" "$steps" \
  "$art/dashboard.png" || fail "the dashboard check failed (screenshot: $art/dashboard.png)"

# a web dir without uPlot: the page says what is missing and how to install it
mkdir -p "$tmp/web"
cp "$root/web/index.html" "$root/web/dash.js" "$root/web/dash.css" "$tmp/web/"
GRIT_WEB_DIR="$tmp/web" "$grit" dashboard "$tmp/run" --port 0 --port-file "$tmp/port2" 2> "$tmp/port2.log" &
pids+=($!)
for _ in $(seq 1 100); do [ -s "$tmp/port2" ] && break; sleep 0.1; done
code=$(curl -s -o "$tmp/page.html" -w '%{http_code}' "http://127.0.0.1:$(cat "$tmp/port2")/" || true)
if [ "$code" = 503 ] && grep -q "uPlot is not installed" "$tmp/page.html" && grep -q "make deps" "$tmp/page.html" &&
   grep -q "uPlot is not installed" "$tmp/port2.log"; then
  echo "ok   without uPlot: 503 page and a log line saying how to install it"
else
  fail "without uPlot: HTTP $code, $(head -c 300 "$tmp/page.html")"
fi
[ $fails -eq 0 ] && echo "obs_browser: all checks passed"
exit $((fails > 0))
