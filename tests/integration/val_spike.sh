#!/usr/bin/env bash
# val_spike.sh GRIT PYTHON - the supervisor flags a validation spike (docs/supervisor.md):
# a 2-node job under grit launch validating every 2 steps reports each held-out loss to the
# supervisor (event "validation" of rank 0). With --inject val_spike:step=24 the value
# reported at step 24 is 100x (metrics.jsonl keeps the true one): one validation_spike event
# naming step 24, a WARNING line, the summary's "validation spikes" row, and nothing else
# happens (no restart, no incident, final weights bitwise equal to the run without it).
# The run without it flags nothing: a falling validation curve is no spike.
set -euo pipefail
grit=$1 py=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
source "$here/sup_lib.sh"
tiny_job "$tmp/job.json" 4 40 0
"$py" - "$tmp/job.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["eval"] = {"interval_steps": 2, "samples": 2}
json.dump(c, open(sys.argv[1], "w"))
PY
L() { # RUN [--inject SPEC]
  "$grit" launch --run "$1" --nodes 2 --spares 0 --max-restarts 0 "${@:2}" \
    -- "$grit" train "$tmp/job.json" --run-dir "$1" > "$1.out" 2> "$1.err"
}
L "$tmp/plain" || fail "the plain run failed: $(tail -5 "$tmp/plain.err")"
L "$tmp/spiked" --inject val_spike:step=24 || fail "the spiked run failed: $(tail -5 "$tmp/spiked.err")"
"$py" - "$tmp/plain" "$tmp/spiked" <<'PY' || fail "events"
import json, sys
def ev(d):
    return [json.loads(l) for l in open(d + "/events.jsonl")]
plain, spiked = ev(sys.argv[1]), ev(sys.argv[2])
vals = [e for e in spiked if e.get("event") == "worker_event" and e.get("kind") == "validation"]
assert len(vals) == 20, f"{len(vals)} validation reports, expected 20 (every 2 of 40 steps)"
assert not [e for e in plain if e.get("event") == "validation_spike"], "the plain run flagged a spike"
sp = [e for e in spiked if e.get("event") == "validation_spike"]
assert len(sp) == 1 and sp[0]["step"] == 24, sp
assert sp[0]["val_loss"] > 50 * sp[0]["median"], sp[0]
for name, evs in (("plain", plain), ("spiked", spiked)):
    done = [e for e in evs if e.get("event") == "done"]
    assert done and done[-1]["restarts"] == 0 and done[-1]["incidents"] == 0, (name, done)
assert [e for e in spiked if e.get("event") == "done"][-1]["validation_spikes"] == 1
print(f"validation spike flagged at step 24: {sp[0]['val_loss']:.4g} vs median {sp[0]['median']:.4g}, "
      f"robust z {sp[0]['robust_z']:.0f}; no restart, no incident")
PY
grep -q "WARNING: validation loss .* at step 24 is a spike" "$tmp/spiked.err" ||
  fail "no warning line: $(grep -i valid "$tmp/spiked.err" | head -3)"
grep -qE "validation spikes +1 flagged, the latest at step 24" "$tmp/spiked.err" "$tmp/spiked.out" ||
  fail "no summary row"
cmp -s "$tmp/plain/model.safetensors" "$tmp/spiked/model.safetensors" || fail "final weights differ"
diff -q <(grep -o '"val_loss":[^,}]*' "$tmp/plain/metrics.jsonl") \
        <(grep -o '"val_loss":[^,}]*' "$tmp/spiked/metrics.jsonl") > /dev/null ||
  fail "metrics.jsonl's validation losses differ (the fault must only change the report)"
[ $fails -eq 0 ] && echo "val_spike: all checks passed"
exit $fails
