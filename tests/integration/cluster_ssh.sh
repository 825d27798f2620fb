#!/usr/bin/env bash
# cluster_ssh.sh GRIT - `grit cluster` with the ssh provider on three sshd "hosts" the test
# makes: each a network namespace on the test's bridge (GRIT_CLUSTER_SSH_BRIDGE, default
# gclssh0, 10.79.62.0/24; hosts at .11 .12 .13) with its own host name (UTS namespace) and
# its own files under the cluster's RemoteDir (a mount namespace binds the host's folder on
# $tmp/vm), running OpenSSH sshd with the test's host key and authorized_keys. grit reaches
# them only through ssh/scp with the test's key and a known_hosts file of their host key.
#
#   1. a known_hosts with a different key: create fails, naming the host key, leaving
#      nothing on the hosts;
#   2. create 1 controller + 2 workers: all Running, the lifecycle script ran on each host
#      (its host name in describe-node), sinfo (on the controller) shows both workers idle,
#      `srun -N 2 hostname` runs on both;
#   3. replace-node n3: a new NodeId, Running, idle again, a job runs on it;
#   4. delete: no process of the cluster on any host, no RemoteDir left, no rows.
# The sshd processes are ended by PID, namespaces, bridge and temp folder removed, also on
# failure. Exit 77 (skipped, said loudly): not root, no sshd/Slurm/munge, no namespaces.
set -euo pipefail
grit=$(realpath "$1")
skip() { echo "SKIP (cluster ssh): $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (namespaces, sshd, munged, slurmd)"
for b in /usr/sbin/sshd ssh scp ssh-keygen slurmctld slurmd munged srun sinfo ip nsenter unshare; do
  command -v "$b" > /dev/null || [ -x "/usr/sbin/$b" ] || skip "$b not installed (scripts/install-deps.sh)"
done
bridge=${GRIT_CLUSTER_SSH_BRIDGE:-gclssh0} subnet=${GRIT_CLUSTER_SSH_SUBNET:-10.79.62}
ip link show "$bridge" > /dev/null 2>&1 && skip "bridge $bridge exists (another run? set GRIT_CLUSTER_SSH_BRIDGE)"

tmp=$(mktemp -d /tmp/grit-cluster-ssh.XXXXXX)
chmod 0755 "$tmp" # munged runs as user munge
state=$tmp/state name=sshtest vm=$tmp/vm rd=$tmp/vm/grit-node
sshd_pids=()
G=("$grit" cluster --state "$state" --health --quick)
cleanup() {
  if [ -f "$state/state.db" ]; then "${G[@]}" --quiet delete "$name" > /dev/null 2>&1 || true; fi
  local p
  for p in "${sshd_pids[@]}"; do kill -TERM "$p" 2> /dev/null || true; done
  for p in "${sshd_pids[@]}"; do
    for _ in $(seq 20); do kill -0 "$p" 2> /dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2> /dev/null || true
  done
  for i in 1 2 3; do
    ip netns del "$bridge-h$i" 2> /dev/null || true
    ip link del "$bridge-h$i" 2> /dev/null || true
  done
  ip link del "$bridge" 2> /dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok   $*"; }

# --- the hosts: keys, network, sshd -------------------------------------------------------
ssh-keygen -q -t ed25519 -N '' -f "$tmp/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$tmp/id"
ssh-keygen -q -t ed25519 -N '' -f "$tmp/other_key"
cp "$tmp/id.pub" "$tmp/authorized_keys"
cat > "$tmp/sshd_config" << EOF
HostKey $tmp/host_key
AuthorizedKeysFile $tmp/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile none
Subsystem sftp internal-sftp
EOF
mkdir -p "$vm" /run/sshd
hosts="127.0.0.1 localhost"$'\n'
for i in 1 2 3; do hosts+="$subnet.1$i n$i"$'\n'; done
printf '%s' "$hosts" > "$tmp/hosts"
: > "$tmp/known_hosts" && : > "$tmp/wrong_known_hosts"
ip link add "$bridge" type bridge || skip "cannot create a bridge here"
ip addr add "$subnet.1/24" dev "$bridge"
ip link set "$bridge" up
for i in 1 2 3; do
  ns=$bridge-h$i addr=$subnet.1$i
  ip netns add "$ns" || skip "cannot create network namespaces here"
  ip link add "$ns" type veth peer name eth0 netns "$ns"
  ip -n "$ns" addr add "$addr/24" dev eth0
  ip -n "$ns" link set lo up
  ip -n "$ns" link set eth0 up
  ip link set "$ns" master "$bridge"
  ip link set "$ns" up
  mkdir -m 0755 "$tmp/host$i" "$tmp/root$i"
  # the host: its name, its files at $vm, its own empty /root (not this machine's shell
  # start-up files), the test's hosts file, sshd on its address
  nsenter --net="/run/netns/$ns" unshare --mount --uts --propagation private sh -c \
    'hostname "$1" && mount --bind "$2" "$3" && mount --bind "$4" /etc/hosts && mount --bind "$7" /root &&
      exec /usr/sbin/sshd -D -e -f "$5" -o ListenAddress="$6"' \
    sshhost "n$i" "$tmp/host$i" "$vm" "$tmp/hosts" "$tmp/sshd_config" "$addr" "$tmp/root$i" > "$tmp/sshd.h$i.log" 2>&1 &
  sshd_pids+=($!)
  echo "$addr $(cut -d' ' -f1,2 "$tmp/host_key.pub")" >> "$tmp/known_hosts"
  echo "$addr $(cut -d' ' -f1,2 "$tmp/other_key.pub")" >> "$tmp/wrong_known_hosts"
done
for i in 1 2 3; do
  up=0
  for _ in $(seq 50); do
    ip netns exec "$bridge-h$i" ss -Htln "sport = :22" 2> /dev/null | grep -q . && { up=1; break; }
    sleep 0.1
  done
  [ "$up" = 1 ] || { cat "$tmp/sshd.h$i.log"; echo "FAIL: sshd on host $i did not listen"; exit 1; }
done
ssh_to() { # ssh_to ADDR CMD: as grit does
  ssh -o UserKnownHostsFile="$tmp/known_hosts" -o StrictHostKeyChecking=yes -o BatchMode=yes \
    -o GlobalKnownHostsFile=/dev/null -i "$tmp/id" -o IdentitiesOnly=yes "root@$1" -- "$2"
}
[ "$(ssh_to "$subnet.12" hostname)" = n2 ] || fail "the test's own ssh to host 2 does not work"

# --- the spec -----------------------------------------------------------------------------
mkdir -p "$tmp/lc"
cat > "$tmp/lc/on_create.sh" << 'EOF'
#!/bin/bash
echo "on_create: node $GRIT_NODE_NAME host $(hostname) addr $GRIT_NODE_ADDR group $GRIT_INSTANCE_GROUP_NAME dir $GRIT_LIFECYCLE_DIR"
EOF
spec() { # spec KNOWN_HOSTS
  cat > "$tmp/spec.json" << EOF
{"ClusterName": "$name",
 "Network": {"Port": 18600},
 "Ssh": {"User": "root", "IdentityFile": "id", "KnownHosts": "$1", "RemoteDir": "$rd"},
 "InstanceGroups": [
  {"InstanceGroupName": "controller", "Role": "controller", "InstanceType": "ml.c5.xlarge",
   "InstanceCount": 1, "Hosts": ["$subnet.11"],
   "LifeCycleConfig": {"SourceS3Uri": "lc", "OnCreate": "on_create.sh"}},
  {"InstanceGroupName": "workers", "Role": "worker", "InstanceType": "ml.g5.xlarge",
   "InstanceCount": 2, "Hosts": ["$subnet.12", "$subnet.13"],
   "LifeCycleConfig": {"SourceS3Uri": "lc", "OnCreate": "on_create.sh"}}]}
EOF
}
status_of() { "${G[@]}" --json describe-node "$name" "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["NodeDetails"]["InstanceStatus"]["Status"])'; }
id_of() { "${G[@]}" --json describe-node "$name" "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["NodeDetails"]["NodeId"])'; }
SC="SLURM_CONF=$rd/etc/slurm.conf"
slurm_state() { ssh_to "$subnet.11" "$SC sinfo -h -N -n $1 -o %T" 2> /dev/null | head -1; }

# 1. host keys are checked
spec wrong_known_hosts
out=$("$grit" cluster --state "$tmp/state-bad" --health --quick create "$tmp/spec.json" 2>&1) &&
  fail "create with a wrong host key succeeded"
grep -q "host key did not match" <<< "$out" || fail "the wrong-host-key error does not say so: $out"
[ -z "$(find "$tmp/host1" "$tmp/host2" "$tmp/host3" -mindepth 1)" ] || fail "a host got files although its key was wrong"
[ "$fails" -eq 0 ] && ok "a host whose key is not in KnownHosts is refused: nothing was made"

# 2. create
spec known_hosts
t0=$SECONDS
"${G[@]}" create "$tmp/spec.json" || { fail "create failed"; tail -20 "$state/$name/logs/provider.log"; exit 1; }
echo "create: $((SECONDS - t0)) s"
st=$("${G[@]}" --json list-nodes "$name" | python3 -c 'import json,sys; print(" ".join(n["PrivateDnsHostname"] + "=" + n["InstanceStatus"]["Status"] for n in json.load(sys.stdin)["ClusterNodeSummaries"]))')
[ "$st" = "n1=Running n2=Running n3=Running" ] || fail "nodes after create: $st, expected all Running"
for n in n1 n2 n3; do
  grep -q "on_create: node $n host $n addr $subnet.1${n#n} group .* dir $rd/lifecycle/" \
    <<< "$("${G[@]}" describe-node "$name" $n)" || fail "$n: the lifecycle script did not run on its host: $("${G[@]}" describe-node "$name" $n)"
done
for n in n2 n3; do [ "$(slurm_state $n)" = idle ] || fail "$n is '$(slurm_state $n)' in Slurm, expected idle"; done
"${G[@]}" --json describe "$name" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["Provider"] == "ssh", d' ||
  fail "describe does not name the ssh provider"
out=$(ssh_to "$subnet.11" "$SC timeout 30 srun -N 2 hostname" 2>&1 | sort | tr '\n' ' ')
[ "$out" = "n2 n3 " ] || fail "srun -N 2 hostname on the cluster gave '$out', expected 'n2 n3 '"
[ "$fails" -eq 0 ] && ok "ssh cluster created in $((SECONDS - t0)) s: 3 hosts Running, a 2-node job ran"

# 3. replace a worker
old=$(id_of n3)
"${G[@]}" --no-health replace-node "$name" n3 || fail "replace-node n3 failed"
[ "$(id_of n3)" != "$old" ] || fail "n3 kept its NodeId $old after replace-node"
[ "$(status_of n3)" = Running ] || fail "n3 is $(status_of n3) after replace-node"
for _ in $(seq 50); do [ "$(slurm_state n3)" = idle ] && break; sleep 0.2; done
[ "$(slurm_state n3)" = idle ] || fail "n3 is '$(slurm_state n3)' in Slurm after replace-node"
out=$(ssh_to "$subnet.11" "$SC timeout 30 srun -N 1 -w n3 hostname" 2>&1)
[ "$out" = n3 ] || fail "a job on the replaced n3 gave '$out'"
[ "$fails" -eq 0 ] && ok "replace-node n3 on its ssh host: new NodeId, idle, runs jobs"

# 4. delete leaves nothing on the hosts
"${G[@]}" delete "$name" || fail "delete failed"
left=""
for p in /proc/[0-9]*; do
  c=$(tr '\0' ' ' 2> /dev/null < "$p/cmdline" || true)
  d=$(readlink "$p/cwd" 2> /dev/null || true)
  if [[ $c == *"$vm"* || $d == "$vm"* || $c == *"$state"* ]]; then left+=" ${p#/proc/}:$c"; fi
done
[ -z "$left" ] || fail "left after delete: processes:$left"
for i in 1 2 3; do [ -z "$(ls -A "$tmp/host$i")" ] || fail "left after delete on host $i: $(ls -A "$tmp/host$i")"; done
[ "$(sqlite3 -cmd ".timeout 10000" "$state/state.db" 'select count(*) from nodes')" = 0 ] || fail "rows left after delete"
[ "$fails" -eq 0 ] && ok "delete: no process, folder or row of the cluster left on any host"
[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; for f in "$state/$name/logs/provider.log"; do [ -f "$f" ] && tail -30 "$f"; done; exit 1; }
echo "PASS"
