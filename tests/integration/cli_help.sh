#!/usr/bin/env bash
# cli_help.sh GRIT - every command answers --help with usage on stdout and exit 0;
# unknown commands and options are errors (exit 2) with usage on stderr.
set -euo pipefail
grit=$1
fail=0
check() { # expected-rc pattern args...
  local want=$1 pat=$2; shift 2
  local out rc=0
  out=$("$grit" "$@" 2>&1) || rc=$?
  if [ "$rc" -ne "$want" ] || ! grep -q -- "$pat" <<<"$out"; then
    echo "FAIL: grit $* -> rc $rc (want $want), output lacks '$pat':"; echo "$out"; fail=1
  fi
}
check 0 "usage: grit <command>" --help
check 0 "usage: grit train CONFIG.json" train --help
check 0 "usage: grit health" health --help
check 2 "unknown option or missing value: .--bogus." health --bogus
check 0 "usage: grit tokenize" tokenize --help
check 2 "missing -o PREFIX" tokenize x.txt --tokenizer t.json
check 0 "usage: grit generate" generate --help
check 0 "usage: grit eval" eval --help
check 2 "missing --checkpoint DIR" eval --ids 1,2
check 2 "give exactly one of --data, --jsonl, --text, --ids, --task" eval --checkpoint x --ids 1,2 --data y
check 2 "--task needs --task-type mc or cloze" eval --checkpoint x --task t.jsonl --tokenizer t.json
check 2 "--seq-len: expected an integer" eval --checkpoint x --data y --seq-len 0
check 0 "usage: grit dashboard" dashboard --help
check 0 "usage: grit serve CHECKPOINT" serve --help
check 2 "missing CHECKPOINT" serve --port 0
check 2 "--port: expected an integer" serve x --port 70000
check 2 "RUN_DIR is required" dashboard
check 2 "grit dashboard: --port: expected an integer" dashboard /tmp --port 99999
check 2 "grit launch: --dashboard-port: expected an integer" launch --run x --dashboard-port -1 -- true
check 2 "no metrics.jsonl or events.jsonl" dashboard /nonexistent-run
check 2 "--price-node-hour: expected a number" launch --price-node-hour cheap --run x -- true
check 2 "--straggler-min-gap: expected a number in \[0, 1e+07\], got '-0.5'" launch --run x --straggler-min-gap -0.5 -- true
# Every number argument is checked whole and in range (src/cli/cli_num.c): these were once
# read with atoi/strtol and became 0 or garbage without a word.
check 2 "--nodes: expected an integer in \[1, 100000\], got 'four'" launch --run x --nodes four -- true
check 2 "--hang-timeout: expected a number in \[0, 1e+07\], got '5s'" launch --run x --hang-timeout 5s -- true
check 2 "--util-factor: expected a number in \[0, 1), got 1" launch --run x --util-factor 1 -- true
check 2 "--clock-factor: expected a number in \[0, 1), got 1" launch --run x --clock-factor 1 -- true
check 2 "--strikes: expected an integer in \[0, 1000000\], got '(nothing)'" launch --run x --strikes
check 2 "--keep-last: expected an integer in \[1, " ckpt prune /tmp --keep-last two
check 2 "STEP: expected an integer in \[0, " ckpt export /nonexistent-grit-ckpt 12x /tmp/x
check 2 "--attempts: expected an integer in \[1, 10\], got '11'" cluster --attempts 11 list
check 2 "--threads: expected an integer in \[1, 1024\], got '0'" tokenize x.txt --threads 0 --tokenizer t.json -o p
check 0 "usage: grit prep" prep --help
check 0 "usage: grit cluster" cluster --help
check 0 "usage: grit cluster" cluster create --help
check 2 "unknown command .bogus." cluster bogus
check 2 "usage: grit cluster .options. describe-node NAME NODE" cluster describe-node x
check 2 "unknown option .--bogus." cluster --bogus list
check 2 "missing -o DIR" prep x.html
check 2 "--minhash: .*expected refinedweb, cheap or off" prep x.html -o d --minhash big
if "$grit" --help | grep "^  s3 " > /dev/null; then  # built with S3
  check 0 "usage: grit s3" s3 --help
  check 2 "unknown option --bogus" s3 ls s3://b --bogus
  check 2 "--concurrency: expected an integer in \[1, 256\], got '5000'" s3 ls s3://b --concurrency 5000
fi
check 0 "grit 0\." --version
check 2 "unknown command 'frobnicate'" frobnicate
check 2 "unknown option or missing value: '--bogus'" train x.json --bogus
check 2 "--steps: expected an integer" train x.json --steps zero
check 1 "x-does-not-exist.json: cannot open" train x-does-not-exist.json
[ $fail -eq 0 ] && echo "cli_help: all checks passed"
exit $fail
