#!/usr/bin/env bash
# s3_ckpt.sh GRIT - s3:// checkpoints against a real S3 server (Swift's S3 API on loopback):
# a run saving to S3 equals the run saving locally bit for bit; kills at every commit
# phase and inside an upload resume bitwise equal and never trust a half-written step;
# grit's objects read back with awscli match byte for byte, a checkpoint uploaded by
# awscli is verified and resumed by grit; a truncated object is caught by the manifest.
set -euo pipefail
source "$(dirname "$0")/s3_lib.sh" "$1"
run_reference

# 1. uninterrupted run to S3
cfg=$(s3cfg plain)
"$grit" train "$cfg" --run-dir "$tmp/plain" --quiet || fail "plain: training failed"
same_as_reference "$tmp/plain" plain
"$grit" ckpt verify s3://ckpt/plain >/dev/null || fail "plain: grit ckpt verify s3://ckpt/plain failed"
[ "$(awsc s3 cp s3://ckpt/plain/LATEST -)" = step_00000012 ] || fail "plain: LATEST is not step_00000012"
# grit wrote (multipart above 5 MiB), awscli reads: every file equals the local run's
awsc s3 cp --recursive s3://ckpt/plain/step_00000012 "$tmp/plain-aws" >/dev/null
for f in model.safetensors optimizer.safetensors config.json trainer_state.json manifest.json; do
  cmp -s "$tmp/ref/ckpt/step_00000012/$f" "$tmp/plain-aws/$f" ||
    fail "plain: $f read back by awscli differs from the locally written one"
done
n=$(awsc s3 ls --recursive s3://ckpt/plain/ | wc -l)
[ "$n" -eq 11 ] || fail "plain: expected 11 objects (2 steps x 5 + LATEST) after pruning, found $n"
echo "ok   plain: bitwise equal to local checkpoints; awscli reads grit's objects"

# 2. killed at every commit phase, and inside an upload; resumed
crash_then_resume() { # NAME FAULT
  local name=$1 fault=$2 rc=0 c
  c=$(s3cfg "$name")
  GRIT_CKPT_FAULT=$fault "$grit" train "$c" --run-dir "$tmp/$name" --quiet 2>"$tmp/$name.err" || rc=$?
  if [ $rc -ne 137 ]; then fail "$name: expected the injected SIGKILL (137), got $rc"; cat "$tmp/$name.err"; return; fi
  "$grit" train "$c" --run-dir "$tmp/$name" --quiet 2>"$tmp/$name.err2" ||
    { fail "$name: resume failed"; cat "$tmp/$name.err2"; return; }
  same_as_reference "$tmp/$name" "$name"
  "$grit" ckpt verify "s3://ckpt/$name" >"$tmp/$name.verify" ||
    { fail "$name: a step in s3://ckpt/$name does not verify after the run"; cat "$tmp/$name.verify"; }
  local from
  from=$(grep -o '"event":"resume","dir":"[^"]*"' "$tmp/$name/events.jsonl" | tail -1 | sed 's/.*"dir"://' || true)
  echo "ok   $name ($fault): resumed from ${from:-scratch}"
}
crash_then_resume files2 crash:files@2      # data of step 6 uploaded, no manifest
crash_then_resume manifest2 crash:manifest@2
crash_then_resume latest3 crash:latest@3
# inside the optimizer upload of the second save (5.2 MB model + its state: ~21 MB in)
crash_then_resume byte crash_byte:21000000

# 3. awscli writes a checkpoint (from the local run), grit verifies and resumes from it
awsc s3 cp --recursive "$tmp/ref/ckpt/step_00000009" s3://ckpt/byaws/step_00000009 >/dev/null
printf 'step_00000009\n' | awsc s3 cp - s3://ckpt/byaws/LATEST >/dev/null
"$grit" ckpt verify s3://ckpt/byaws >"$tmp/byaws.verify" || { fail "byaws: grit cannot verify awscli's upload"; cat "$tmp/byaws.verify"; }
"$grit" train "$(s3cfg byaws)" --run-dir "$tmp/byaws" --quiet || fail "byaws: resume failed"
grep -q '"event":"resume","dir":"step_00000009"' "$tmp/byaws/events.jsonl" || fail "byaws: did not resume from step_00000009"
# the resumed run saved only step 12: compare what it could compute, the final weights
cmp -s "$tmp/ref/model.safetensors" "$tmp/byaws/model.safetensors" || fail "byaws: final weights differ"
echo "ok   byaws: awscli's multipart upload verified and resumed by grit"

# 4. a truncated object: the manifest catches it, the run falls back to the step before
awsc s3 cp s3://ckpt/plain/step_00000012/model.safetensors "$tmp/m.st" >/dev/null
head -c 4000000 "$tmp/m.st" > "$tmp/m.short"
awsc s3 cp "$tmp/m.short" s3://ckpt/plain/step_00000012/model.safetensors >/dev/null
rc=0; out=$("$grit" ckpt verify s3://ckpt/plain 2>&1) || rc=$?
if [ $rc -ne 1 ] || ! grep -q "model.safetensors: size 4000000, manifest says .*truncated" <<<"$out"; then
  fail "truncated: grit ckpt verify: expected exit 1 naming the truncation, got $rc: $out"
fi
"$grit" train "$cfg" --run-dir "$tmp/plain" --quiet 2>/dev/null || fail "truncated: resume failed"
grep -q '"event":"ckpt_rejected","dir":"step_00000012"' "$tmp/plain/events.jsonl" || fail "truncated: step 12 not rejected"
grep -q '"event":"resume","dir":"step_00000009"' "$tmp/plain/events.jsonl" || fail "truncated: did not fall back to step 9"
same_as_reference "$tmp/plain" truncated
echo "ok   truncated: detected by the manifest, fell back to step_00000009"
# 5. two tiers (cache_dir): local commit first, then upload; resume from the local copy
# when it verifies, else from S3
tc=$(s3cfg tier "s#\"dir\": \"s3://ckpt/tier\",#\"dir\": \"s3://ckpt/tier\", \"cache_dir\": \"$tmp/cache\",#")
grep -q cache_dir "$tc" || fail "tier: config edit failed"
rc=0; GRIT_CKPT_FAULT=crash:latest@3 "$grit" train "$tc" --run-dir "$tmp/tier" --quiet 2>/dev/null || rc=$?
[ $rc -eq 137 ] || fail "tier: expected the injected SIGKILL, got $rc"
"$grit" ckpt verify "$tmp/cache" >/dev/null || fail "tier: the local tier does not verify"
"$grit" ckpt verify s3://ckpt/tier >/dev/null || fail "tier: the S3 tier does not verify"
"$grit" train "$tc" --run-dir "$tmp/tier" --quiet || fail "tier: resume failed"
same_as_reference "$tmp/tier" tier
for f in model.safetensors optimizer.safetensors manifest.json; do
  awsc s3 cp "s3://ckpt/tier/step_00000012/$f" "$tmp/tier-$f" >/dev/null
  cmp -s "$tmp/cache/step_00000012/$f" "$tmp/tier-$f" || fail "tier: S3 copy of $f differs from the local one"
done
# S3 down: the local copy alone resumes
kill -9 "$(cat "$S3/run/proxy.pid")"
"$grit" train "$tc" --run-dir "$tmp/tier" --quiet 2>/dev/null || fail "tier: resume from the local copy with S3 down failed"
grep '"event":"resume"' "$tmp/tier/events.jsonl" | tail -1 | grep step_00000012 > /dev/null || fail "tier: S3 down: did not resume from step 12"
"$root/scripts/s3-local.sh" proxy "$S3"
# a corrupt local copy: the S3 copy of the same step is used
flip() { "$PY" -c "import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); b[len(b)//2]^=1; open(p,'wb').write(b)" "$1"; }
PY=/usr/bin/python3 flip "$tmp/cache/step_00000012/model.safetensors"
"$grit" train "$tc" --run-dir "$tmp/tier" --quiet || fail "tier: resume with a corrupt local copy failed"
grep '"event":"resume"' "$tmp/tier/events.jsonl" | tail -1 | grep step_00000012 > /dev/null || fail "tier: corrupt local: did not resume from S3's step 12"
grep -q '"event":"ckpt_local_rejected","dir":"step_00000012"' "$tmp/tier/events.jsonl" ||
  fail "tier: corrupt local: the switch to the S3 copy was not recorded"
same_as_reference "$tmp/tier" tier-corrupt-local
# no local cache at all: resume from S3
rm -rf "$tmp/cache"
"$grit" train "$tc" --run-dir "$tmp/tier" --quiet || fail "tier: resume from S3 alone failed"
grep '"event":"resume"' "$tmp/tier/events.jsonl" | tail -1 | grep step_00000012 > /dev/null || fail "tier: no cache: did not resume from S3's step 12"
same_as_reference "$tmp/tier" tier-no-cache
echo "ok   tier: local first, uploaded; resumed from local (S3 down), from S3 (local corrupt, local gone)"
finish s3_ckpt
