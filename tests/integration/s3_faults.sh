#!/usr/bin/env bash
# s3_faults.sh GRIT PYTHON - S3 failures during training, against a real S3 server
# (Swift's S3 API on loopback) behind a fault-injecting proxy (s3_fault_proxy.py):
#   wrong secret       a clear 403 error at once, nothing retried, the secret never printed
#   500/503 on parts   the parts are retried; the run equals the uninterrupted one
#   server killed      mid-upload (SIGKILL by PID at the third part of an upload): the save
#                      fails after bounded retries, no half checkpoint is trusted, and after
#                      the server is back the run resumes bitwise equal and aborts the
#                      multipart upload the dead server could not be told to abort
#   restore traffic    a resume downloads each object once (verify and load share it)
set -euo pipefail
source "$(dirname "$0")/s3_lib.sh" "$1"
py=$2
run_reference
real_endpoint=$AWS_ENDPOINT_URL
upstream=${AWS_ENDPOINT_URL##*:}

# start_proxy NAME ARGS...: a fault proxy in front of the server; sets AWS_ENDPOINT_URL
start_proxy() {
  local name=$1; shift
  "$py" "$(dirname "$0")/s3_fault_proxy.py" "$upstream" "$tmp/$name.port" "$@" 2>"$tmp/$name.proxy" &
  pids+=($!)
  for _ in $(seq 100); do [ -s "$tmp/$name.port" ] && break; sleep 0.1; done
  [ -s "$tmp/$name.port" ] || { fail "$name: the fault proxy did not start"; cat "$tmp/$name.proxy"; exit 1; }
  export AWS_ENDPOINT_URL=http://127.0.0.1:$(cat "$tmp/$name.port")
}

# 1. wrong secret
secret='Wr0ngS3cretVALUE9'
rc=0; start=$(date +%s)
out=$(AWS_SECRET_ACCESS_KEY=$secret timeout 60 "$grit" train "$(s3cfg wrongkey)" --run-dir "$tmp/wrongkey" --quiet 2>&1) || rc=$?
took=$(( $(date +%s) - start ))
if [ $rc -eq 0 ] || [ $rc -eq 124 ]; then fail "wrong secret: expected a quick failure, got rc=$rc"; fi
grep -q "HTTP 403 SignatureDoesNotMatch" <<<"$out" || fail "wrong secret: no clear 403 error in: $out"
grep -q "after 1 attempt" <<<"$out" || fail "wrong secret: the 403 was retried: $out"
if grep -rq "$secret" <<<"$out" "$tmp/wrongkey" 2>/dev/null; then fail "wrong secret: the secret was printed or logged"; fi
echo "ok   wrong secret: failed in ${took}s with: $(grep -o 'S3 [a-zA-Z]* s3://[^ ]*: HTTP 403 SignatureDoesNotMatch' <<<"$out" | head -1)"

# 2. 503 and 500 on parts: retried, the run completes and equals the reference
start_proxy flaky --fail-parts 1:503,2:500,3:503
"$grit" train "$(s3cfg flaky)" --run-dir "$tmp/flaky" --quiet || fail "flaky: training failed"
same_as_reference "$tmp/flaky" flaky
n=$(grep -c '^fault: ' "$tmp/flaky.proxy" || true)
[ "$n" -ge 3 ] || fail "flaky: expected the proxy to inject at least 3 errors, it did $n"
if grep -q ckpt_failed "$tmp/flaky/events.jsonl"; then fail "flaky: a save failed despite retries"; fi
AWS_ENDPOINT_URL=$real_endpoint "$grit" ckpt verify s3://ckpt/flaky >/dev/null || fail "flaky: checkpoints do not verify"
echo "ok   flaky: $n injected 5xx answers retried; run bitwise equal"

# 3. the server is killed in the middle of an upload (third part of the optimizer state)
start_proxy killed --kill-at-part "3:$S3/run/proxy.pid"
rc=0
"$grit" train "$(s3cfg killed 's#"on_error"#"x"#; s#"keep_last": 2#"keep_last": 2, "on_error": "stop"#')" \
  --run-dir "$tmp/killed" --quiet 2>"$tmp/killed.err" || rc=$?
[ $rc -ne 0 ] || fail "killed: expected the run to stop on the failed save (on_error stop)"
grep -q "^fault: killed server" "$tmp/killed.proxy" || fail "killed: the proxy did not kill the server"
grep -q '"event":"ckpt_failed"' "$tmp/killed/events.jsonl" || fail "killed: no ckpt_failed event"
export AWS_ENDPOINT_URL=$real_endpoint
"$root/scripts/s3-local.sh" proxy "$S3"
# the dead server could not be told to abort: its parts are still stored (and billed)
uploads() { awsc s3api list-multipart-uploads --bucket ckpt --prefix "$1" --query 'length(Uploads || `[]`)' --output text; }
orphans=$(uploads killed/)
[ "$orphans" -ge 1 ] || fail "killed: expected the killed upload to be left in progress, found $orphans"
# the interrupted step has no manifest: not trusted; the next run starts over and completes
"$grit" train "$(s3cfg killed)" --run-dir "$tmp/killed" --quiet 2>"$tmp/killed.err2" ||
  { fail "killed: the run after the restart failed"; cat "$tmp/killed.err2"; }
# ... and aborts the upload the dead run left behind before its first save
left=$(uploads killed/)
[ "$left" = 0 ] || fail "killed: $left multipart uploads still in progress after the next run"
grep -q "\"event\":\"ckpt_uploads_aborted\",.*\"count\":$orphans" "$tmp/killed/events.jsonl" ||
  fail "killed: no ckpt_uploads_aborted event for $orphans uploads: $(grep uploads_aborted "$tmp/killed/events.jsonl")"
grep -q "aborted $orphans unfinished multipart upload" "$tmp/killed.err2" || fail "killed: the abort was not reported"
if grep -q '"event":"resume"' "$tmp/killed/events.jsonl"; then fail "killed: resumed from a half-written checkpoint"; fi
same_as_reference "$tmp/killed" killed
"$grit" ckpt verify s3://ckpt/killed >/dev/null || fail "killed: a step does not verify after the run"
echo "ok   killed: save failed after bounded retries ($(grep -o 'after [0-9]* attempts[^"]*' "$tmp/killed.err" | head -1)); nothing half-written trusted; the $orphans orphaned upload(s) aborted by the next run"
# 4. a restore downloads each object once (verify and load read the same copy)
start_proxy gets --log-gets "$tmp/gets.log"
"$grit" train "$(s3cfg flaky)" --run-dir "$tmp/flaky" --quiet 2>"$tmp/gets.err" || { fail "gets: the resumed run failed"; cat "$tmp/gets.err"; }
grep -q '"event":"resume","dir":"step_00000012"' "$tmp/flaky/events.jsonl" || fail "gets: did not resume from step 12"
for f in model.safetensors optimizer.safetensors; do
  size=$(stat -c %s "$tmp/ref/ckpt/step_00000012/$f")
  got=$(awk -v k="/ckpt/flaky/step_00000012/$f" '$1 == k { s += $2 } END { print s + 0 }' "$tmp/gets.log")
  [ "$got" = "$size" ] || fail "gets: $f ($size bytes) was downloaded as $got bytes during the restore, expected once"
done
echo "ok   gets: a restore downloads model and optimiser state once ($(awk '{ s += $2 } END { print s }' "$tmp/gets.log") bytes in all)"
export AWS_ENDPOINT_URL=$real_endpoint
finish s3_faults
