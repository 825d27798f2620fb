#!/usr/bin/env bash
# health_mpi.sh GRIT - `grit health --quick` across real MPI ranks on loopback
# (mpirun --oversubscribe): the network check's all-reduce sweep and pairwise
# ping-pong on 2 and 3 ranks; the injected faults (a slow link on one rank, a
# corrupted all-reduce result) fail the right check naming the right rank/pair;
# another rank's local failure reaches rank 0's report; every rank exits with
# the same code; a hung peer ends in an error within the dist deadline.
set -euo pipefail
grit=$1
tmp=$(mktemp -d /tmp/grit-health-mpi.XXXXXX)
mpipid=""
# mpipid is `timeout`, which passes TERM on to mpirun, which ends its ranks.
cleanup() {
  if [ -n "$mpipid" ]; then kill -TERM "$mpipid" 2>/dev/null; sleep 1; kill -9 "$mpipid" 2>/dev/null; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
command -v mpirun >/dev/null || { echo "FAIL: mpirun not found (make deps installs openmpi-bin)"; exit 1; }
fail=0
# Small local checks; a relative factor of 10: on shared memory one pair's 8 MiB
# copies sometimes run from cache at 3x the others' rate (see README).
small=(--quick --json --dir "$tmp" --mem-max-bytes 1048576 --disk-bytes 1048576 --net-rel-factor 10)

# Each rank runs this wrapper: optional per-rank fault env, then grit health; it
# records its own exit code so the test can see that every rank agrees.
cat >"$tmp/rank.sh" <<'SH'
#!/usr/bin/env bash
r=${OMPI_COMM_WORLD_RANK:?}
if [ -n "${ONLY_RANK_FAULT:-}" ]; then
  if [ "$r" = "${ONLY_RANK:-}" ]; then export GRIT_HEALTH_FAULT=$ONLY_RANK_FAULT; fi
fi
rc=0
"$@" >"$OUTDIR/out.$r" 2>"$OUTDIR/err.$r" || rc=$?
echo "$rc" >"$OUTDIR/rc.$r"
exit 0 # a non-zero exit would make mpirun kill the other ranks before they record theirs
SH
chmod +x "$tmp/rank.sh"

# mpi NAME NP WANT_RC [grit health args...]: runs NP ranks, checks every rank's rc.
mpi() {
  local name=$1 np=$2 want=$3; shift 3
  mkdir -p "$tmp/$name"
  OUTDIR=$tmp/$name timeout 120 mpirun -np "$np" "$tmp/rank.sh" "$grit" health "$@" \
    >"$tmp/$name/mpirun.log" 2>&1 &
  mpipid=$!
  wait "$mpipid" || true
  mpipid=""
  local q rc
  for ((q = 0; q < np; q++)); do
    rc=$(cat "$tmp/$name/rc.$q" 2>/dev/null || echo missing)
    if [ "$rc" != "$want" ]; then
      echo "FAIL: $name: rank $q exit $rc (want $want)"; tail -n 5 "$tmp/$name/err.$q" "$tmp/$name/out.$q" 2>/dev/null
      fail=1; return 1
    fi
  done
  for ((q = 1; q < np; q++)); do
    if [ -s "$tmp/$name/out.$q" ]; then echo "FAIL: $name: rank $q printed a report"; fail=1; return 1; fi
  done
}

# jcheck NAME CHECK VERDICT [SUBSTRING]: rank 0's report has the check with the verdict.
jcheck() {
  python3 - "$tmp/$1/out.0" "${@:2}" <<'PY'
import json, re, sys
path, name, verdict = sys.argv[1:4]
want = sys.argv[4] if len(sys.argv) > 4 else ""  # a substring, or re:REGEX
rep = json.load(open(path))
c = [x for x in rep["checks"] if x["name"] == name]
if not c:
    sys.exit(f"{name}: missing from the report")
c = c[0]
found = re.search(want[3:], c["reason"]) if want.startswith("re:") else want in c["reason"]
if c["verdict"] != verdict or not found:
    sys.exit(f"{name}: verdict {c['verdict']} (want {verdict}), reason {c['reason']!r} (want {want!r})")
PY
}

# 1. Healthy runs on 2 and 3 ranks: every network check passes (the relative ones
# skip on 2 ranks), the numbers follow the nccl-tests formulas, every pair is measured.
for np in 2 3; do
  if mpi ok$np $np 0 "${small[@]}"; then
    python3 - "$tmp/ok$np/out.0" $np <<'PY' || fail=1
import json, sys
rep = json.load(open(sys.argv[1])); n = int(sys.argv[2])
assert rep["ranks"] == n and rep["exit_code"] == 0, (rep["ranks"], rep["failures"])
net = rep["network"]
assert net["ranks"] == n and len(net["hosts"]) == n
sizes = net["allreduce"]
assert sizes[0]["bytes"] == 8 and sizes[-1]["bytes"] == 1 << 20, [s["bytes"] for s in sizes]
for s in sizes:
    assert s["correct"] and s["time_us"] > 0
    alg = s["bytes"] / (s["time_us"] * 1e-6) / 1e9
    assert abs(s["algbw_gbps"] - alg) <= 1e-9 * max(1, alg), s
    assert abs(s["busbw_gbps"] - alg * 2 * (n - 1) / n) <= 1e-9 * max(1, alg), s
pairs = {(p["a"], p["b"]) for p in net["pairs"]}
assert pairs == {(a, b) for a in range(n) for b in range(a + 1, n)}, pairs
assert net["pair_rounds"] == (n if n % 2 else n - 1)
assert all(p["latency_us"] > 0 and p["gbps"] > 0 for p in net["pairs"])
for c in rep["checks"]:
    if c["family"] == "network":
        rel = c["name"] in ("network.pair_relative", "network.slowest_node")
        assert c["verdict"] == ("skip" if rel and n == 2 else "pass"), c
big = sizes[-1]
print(f"np={n}: {rep['duration_s']:.2f} s; 1 MiB all-reduce busbw {big['busbw_gbps']:.3f} GB/s; "
      f"8 B all-reduce {sizes[0]['time_us']:.1f} us; pairs " +
      ", ".join(f"{p['a']}<->{p['b']} {p['latency_us']:.1f} us {p['gbps']:.2f} GB/s" for p in net["pairs"]))
PY
  fi
done
jcheck ok2 network.slowest_node skip "needs 3 or more ranks" || fail=1

# 2. A slow link. Two ranks: the one pair fails the absolute latency ceiling, named.
if GRIT_HEALTH_FAULT=slow_link mpi slow2 2 1 "${small[@]}"; then
  jcheck slow2 network.pair_latency fail "slowest pair 0<->1" || fail=1
fi
# Three ranks, rank 1 slow: the rank is named as slow with every peer.
if GRIT_HEALTH_FAULT=slow_link GRIT_HEALTH_FAULT_RANK=1 mpi slow3 3 1 "${small[@]}"; then
  jcheck slow3 network.slowest_node fail "slow with every peer: rank 1 (" || fail=1
  jcheck slow3 network.pair_latency fail 're:slowest pair (0<->1|1<->2) ' || fail=1
  jcheck slow3 network.allreduce_correct pass || fail=1
fi

# 3. A corrupted all-reduce result on rank 0 (of 3): the numbers check names it.
if GRIT_HEALTH_FAULT=allreduce_corrupt GRIT_HEALTH_FAULT_RANK=0 mpi bad3 3 1 "${small[@]}"; then
  jcheck bad3 network.allreduce_correct fail "wrong on 1 rank(s), first rank 0 (" || fail=1
fi

# 4. A local check failing on rank 2 only reaches rank 0's report; all ranks exit 1.
if ONLY_RANK=2 ONLY_RANK_FAULT=fsync_fail mpi local3 3 1 "${small[@]}"; then
  jcheck local3 rank2.disk.fsync fail "rank 2 (" || fail=1
  jcheck local3 disk.fsync pass || fail=1
fi

# 5. A hung peer: rank 1 stalls 3 s per message, the deadline is 1 s: the others
# record an error instead of hanging, and every rank exits 2 (could not run).
if GRIT_DIST_TIMEOUT=1 GRIT_HEALTH_NET_DELAY_US=3000000 GRIT_HEALTH_FAULT_RANK=1 ONLY_RANK=1 ONLY_RANK_FAULT=slow_link \
   mpi hung3 3 2 "${small[@]}"; then
  jcheck hung3 network.allreduce error "did not complete within 1 s" || fail=1
  jcheck hung3 rank1.network.allreduce error "rank 1 (" || fail=1
fi

# 6. --slurm is per node: refused under mpirun.
if mpi slurm2 2 2 --slurm "${small[@]}"; then
  grep -q "do not run it under mpirun" "$tmp/slurm2/err.0" || { echo "FAIL: --slurm message"; fail=1; }
fi

# 7. The human table under mpirun: the sweep and the pairs, no colour codes in a file.
if mpi table2 2 0 --quick --dir "$tmp" --mem-max-bytes 1048576 --disk-bytes 1048576; then
  for want in "all-reduce over 2 ranks" "busbw(GB/s)" "pairs (ping-pong, 1 rounds" "0<->1" "HEALTHY"; do
    grep -qF -- "$want" "$tmp/table2/out.0" || { echo "FAIL: table lacks '$want'"; fail=1; }
  done
  if grep -q $'\033' "$tmp/table2/out.0"; then echo "FAIL: colour codes under mpirun"; fail=1; fi
fi

[ $fail -eq 0 ] && echo "health_mpi: all checks passed"
exit $fail
