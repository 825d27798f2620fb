#!/usr/bin/env bash
# slurm-local-cluster.sh - a real multi-node Slurm cluster on this one machine, for
# grit's tests and for trying `srun --auto-resume` by hand. Run as root.
#
#   slurm-local-cluster.sh start          munge + slurmctld + N slurmd; waits until idle
#   slurm-local-cluster.sh stop           stops everything it started (by PID), keeps logs;
#                                         netns mode: also removes namespaces, veths, bridge
#   slurm-local-cluster.sh status | env   state of the daemons and network mode | "export SLURM_CONF=..."
#   slurm-local-cluster.sh kill-node N    hard crash: SIGKILL every process of node N
#   slurm-local-cluster.sh freeze-node N  SIGSTOP every process of node N (a hung node)
#   slurm-local-cluster.sh thaw-node N    SIGCONT them again
#   slurm-local-cluster.sh start-node N   (re)start node N after kill-node
#   slurm-local-cluster.sh fault-node N F tasks on node N get GRIT_HEALTH_FAULT=F (its
#                                         grit health fails); "fault-node N -" clears it
#   slurm-local-cluster.sh partition-node N  netns mode: cut node N off the bridge (veth down)
#   slurm-local-cluster.sh heal-node N    netns mode: connect it again (veth up)
#   slurm-local-cluster.sh slow-link N RATE  netns mode: node N's link limited to RATE (tc
#                                         rate, e.g. 4mbit) both ways with tbf on each end
#                                         of its veth (a NIC that negotiated down); RATE -
#                                         removes the limit
#   slurm-local-cluster.sh node-addr N    the address other nodes reach node N at
#   slurm-local-cluster.sh node-pids N    host PIDs of node N's processes
#   slurm-local-cluster.sh node-exec N CMD...  netns mode: run CMD as root "in" node N (its
#                                         network namespace, host name and hosts file)
#   slurm-local-cluster.sh renew-node N   netns mode: node N stopped, its namespace and veth
#                                         made again (a fresh machine at the same address;
#                                         a fault-node mark stays, to test a bad replacement)
#   slurm-local-cluster.sh wait-node N S  until slurmctld sees node N up (S seconds at most)
#   slurm-local-cluster.sh ping           exit 0 when this directory's slurmctld answers
#   slurm-local-cluster.sh reconfigure    layout mode: GRIT_SLURM_LAYOUT and GRIT_SLURM_NODES
#                                         read again (nodes added or removed): slurm.conf and
#                                         hosts rewritten, namespaces of new nodes made,
#                                         slurmctld restarted, slurmds told to reread
#   slurm-local-cluster.sh remove-node N  layout mode: node N stopped, its namespace and veth
#                                         removed (before a reconfigure without it)
#
# Settings (read by start, remembered in $DIR/cluster.env for the other commands):
#   GRIT_SLURM_DIR   state, config and logs (default /tmp/grit-slurm)
#   GRIT_SLURM_NODES number of nodes n1..nN (default 4)
#   GRIT_SLURM_PORT  slurmctld port; node i listens on PORT+i (default 17900)
#   GRIT_SLURM_CPUS  CPUs each node advertises (default 2)
#   GRIT_SLURM_PLUGIN spank_grit.so to load (optional; loaded as "required")
#   GRIT_SLURM_PLUGIN_ARGS  its arguments, e.g. "grit=/path/to/grit"
#   GRIT_SLURM_NET   local (default): every node on 127.0.0.1; netns: every node in its
#                    own network namespace on a private bridge (see below)
#   GRIT_SLURM_BRIDGE  netns mode: bridge name, also the prefix of the namespaces and
#                    host-side veths "BRIDGE-nI" (default gritbr0, at most 11 characters)
#   GRIT_SLURM_SUBNET  netns mode: first three octets of a /24 that nothing on this
#                    machine uses (default 10.77.0): bridge .1, node i at .(10+i)
#   GRIT_SLURM_LAYOUT  netns mode, optional: a file of lines "nI ROLE GROUP FEATURES"
#                    (grit cluster writes it from its spec). ROLE controller: slurmctld runs
#                    in that node; login: no daemon; worker: a slurmd with Features=FEATURES
#                    (comma list) in partition GROUP (the first worker group is the default);
#                    absent: a slot with no node (no namespace, not in slurm.conf).
#                    Without it: slurmctld on the host side of the bridge, all nodes workers
#                    in partition debug.
#   GRIT_SLURM_DEFER 1: start brings up the network, munge and slurmctld but no slurmd (the
#                    caller prepares each node, then start-node)
#
# Design: every node is `slurmd -D -N nI` (Debian's slurmd supports several per host)
# in its own PID and mount namespace (unshare), so a node crashes or freezes as a unit.
# In local mode all nodes share 127.0.0.1 and differ by port. munge runs privately with its own key
# and socket under $DIR; /etc/slurm and /etc/munge are not touched. SLURM_CONF must be
# exported for every Slurm client (see `env`): without it, a client with no
# /etc/slurm/slurm.conf goes "configless" and asks DNS for the controller. Timeouts are
# short (SlurmdTimeout=5) so failures show within seconds; cred_expire=10 lets a
# requeued job start again after ~11 s instead of the default 121 s.
#
# netns mode: node nI also gets a network namespace BRIDGE-nI (entered with
# `nsenter --net`: `ip netns exec` remounts /sys and slurmd then finds no cgroups; only
# /sys/class/net and /sys/devices/virtual/net come from a sysfs mounted in the node's
# namespace, so its processes see their own interfaces and byte counters, lo and eth0), a
# UTS namespace with host name nI, and a veth pair: BRIDGE-nI on the host, enslaved to
# the bridge, and eth0 inside with SUBNET.(10+I)/24. No namespace has a default route,
# so nothing leaves the bridge. slurmctld stays in the host's network namespace and is
# reached at SUBNET.1; each node's NodeAddr is its own address. slurmctld and the nodes
# see a private /etc/hosts (node names -> addresses) and an empty resolv.conf through
# bind mounts in their own mount namespaces. The names are written to $DIR/net.env
# before anything is created, so `stop` removes them even after a crash of this script.
set -euo pipefail

cmd=${1:-help}
[ $# -gt 0 ] && shift
DIR=$(realpath -m "${GRIT_SLURM_DIR:-/tmp/grit-slurm}")
if [ "$cmd" != start ] && [ -f "$DIR/cluster.env" ]; then
  # shellcheck disable=SC1091
  . "$DIR/cluster.env"
fi
if [ "$cmd" != start ] && [ -f "$DIR/net.env" ]; then
  # the network a start created, even if it crashed before writing cluster.env
  # shellcheck disable=SC1091
  . "$DIR/net.env"
fi
NODES=${GRIT_SLURM_NODES:-4}
PORT=${GRIT_SLURM_PORT:-17900}
CPUS=${GRIT_SLURM_CPUS:-2}
PLUGIN=${GRIT_SLURM_PLUGIN:-}
PLUGIN_ARGS=${GRIT_SLURM_PLUGIN_ARGS:-}
NET=${GRIT_SLURM_NET:-local}
BRIDGE=${GRIT_SLURM_BRIDGE:-gritbr0}
SUBNET=${GRIT_SLURM_SUBNET:-10.77.0}
LAYOUT=${GRIT_SLURM_LAYOUT:-}
DEFER=${GRIT_SLURM_DEFER:-0}
CONF=$DIR/etc/slurm.conf
MSOCK=$DIR/munge/socket
export SLURM_CONF=$CONF

say() { printf 'slurm-local-cluster: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
# layout: field F (2 role, 3 group, 4 features) of node N; role worker without a layout
layout_field() {
  local v=""
  [ -n "$LAYOUT" ] && v=$(awk -v n="$1" -v f="$2" '$1 == n { print $f; exit }' "$LAYOUT")
  if [ -z "$v" ] && [ "$2" = 2 ]; then v=worker; fi
  echo "$v"
}
ctl_node() { [ -n "$LAYOUT" ] && awk '$2 == "controller" { print $1; exit }' "$LAYOUT"; return 0; }
workers() { local i; for i in $(seq "$NODES"); do [ "$(layout_field "n$i" 2)" = worker ] && echo "n$i"; done; return 0; }
is_node() { [[ ${1:-} =~ ^n([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -ge 1 ] && [ "${BASH_REMATCH[1]}" -le "$NODES" ]; }
need_node() {
  [ -f "$DIR/cluster.env" ] || die "no cluster runs in $DIR (start it, or set GRIT_SLURM_DIR)"
  is_node "${1:-}" || die "expected a node name n1..n$NODES, got '${1:-}'"
}
# running and not a zombie
live() { local s; s=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) && [ -n "$s" ] && [ "$s" != Z ] && [ "$s" != X ]; }
# PID from FILE when that process lives and its command line contains WORD
pidof_file() {
  local p
  [ -s "$1" ] || return 1
  p=$(cat "$1")
  [[ $p =~ ^[0-9]+$ ]] && live "$p" && tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -F -- "$2" > /dev/null && echo "$p"
}
# stop PID: SIGTERM, up to 2 s, then SIGKILL
end_pid() {
  local p=$1 i
  kill -TERM "$p" 2>/dev/null || return 0
  for i in $(seq 20); do live "$p" || return 0; sleep 0.1; done
  kill -KILL "$p" 2>/dev/null || true
}

# detach CMD...: runs it in its own session, cwd $DIR; writes its PID to $PIDFILE
detach() {
  rm -f "$PIDFILE"
  (cd "$DIR" && exec setsid sh -c 'echo $$ > "$0"; exec "$@"' "$PIDFILE" "$@" < /dev/null >> "$LOGFILE" 2>&1) &
  local i
  for i in $(seq 100); do [ -s "$PIDFILE" ] && return 0; sleep 0.02; done
  die "could not start $1"
}

# --- network (netns mode) -----------------------------------------------------------------
# node_addr N: where the others reach node N; node_ns N: its network namespace, also the
# name of the host end of its veth pair (inside the namespace the other end is eth0)
node_addr() { if [ "$NET" = netns ]; then echo "$SUBNET.$((10 + ${1#n}))"; else echo 127.0.0.1; fi; }
ctl_addr() {
  local c
  c=$(ctl_node)
  if [ -n "$c" ]; then node_addr "$c"; elif [ "$NET" = netns ]; then echo "$SUBNET.1"; else echo 127.0.0.1; fi
}
node_ns() { echo "$BRIDGE-$1"; }
NODE_IF=eth0

check_net_settings() {
  [ "$NET" = local ] || [ "$NET" = netns ] || die "GRIT_SLURM_NET: expected local or netns, got '$NET'"
  if [ -n "$LAYOUT" ]; then
    [ "$NET" = netns ] || die "GRIT_SLURM_LAYOUT needs GRIT_SLURM_NET=netns"
    [ -f "$LAYOUT" ] || die "GRIT_SLURM_LAYOUT: $LAYOUT: no such file"
  fi
  [ "$NET" = netns ] || return 0
  [[ $BRIDGE =~ ^[a-z][a-z0-9]{0,10}$ ]] || die "GRIT_SLURM_BRIDGE: expected 1..11 lower-case letters and digits, starting with a letter, got '$BRIDGE'"
  [[ $SUBNET =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$ ]] &&
    [ "${BASH_REMATCH[1]}" -le 255 ] && [ "${BASH_REMATCH[2]}" -le 255 ] && [ "${BASH_REMATCH[3]}" -le 255 ] ||
    die "GRIT_SLURM_SUBNET: expected the first three octets of a /24 such as 10.77.0, got '$SUBNET'"
  for b in ip nsenter; do command -v "$b" > /dev/null || die "$b not found (iproute2, util-linux)"; done
  ip link show "$BRIDGE" > /dev/null 2>&1 &&
    die "network interface $BRIDGE exists (a cluster left running? run stop with the same GRIT_SLURM_DIR, or set GRIT_SLURM_BRIDGE)"
  [ -z "$(ip -4 -o addr show to "$SUBNET.0/24")" ] && [ -z "$(ip -4 route show root "$SUBNET.0/24")" ] ||
    die "$SUBNET.0/24 is already used on this machine (set GRIT_SLURM_SUBNET)"
  local i
  for i in $(seq "$NODES"); do
    [ -e "/run/netns/$(node_ns "n$i")" ] && die "network namespace $(node_ns "n$i") exists (run stop, or set GRIT_SLURM_BRIDGE)"
  done
  return 0
}

# The bridge, and per node a namespace and a veth pair. The names go to net.env first,
# so a stop after a crash finds what was made.
net_up() {
  [ "$NET" = netns ] || return 0
  echo "GRIT_SLURM_NET=netns GRIT_SLURM_BRIDGE=$BRIDGE GRIT_SLURM_SUBNET=$SUBNET" > "$DIR/net.env"
  ip link add "$BRIDGE" type bridge || die "cannot create bridge $BRIDGE"
  ip addr add "$SUBNET.1/24" dev "$BRIDGE" # the host side; also the controller without a layout
  ip link set "$BRIDGE" up
  local i
  for i in $(seq "$NODES"); do
    [ "$(layout_field "n$i" 2)" = absent ] || node_net_up "n$i"
  done
}
node_net_up() {
  local n=$1 ns
  ns=$(node_ns "$n")
  ip netns add "$ns" || die "cannot create network namespace $ns"
  ip link add "$ns" type veth peer name "$NODE_IF" netns "$ns" || die "cannot create veth $ns"
  ip -n "$ns" addr add "$(node_addr "$n")/24" dev "$NODE_IF"
  ip -n "$ns" link set lo up
  ip -n "$ns" link set "$NODE_IF" up
  ip link set "$ns" master "$BRIDGE"
  ip link set "$ns" up
}
# a fresh network for node N: its namespace and veth removed and made again
node_net_renew() {
  local ns
  ns=$(node_ns "$1")
  if [ -e "/run/netns/$ns" ]; then ip netns del "$ns" || die "could not remove network namespace $ns"; fi
  ip link del "$ns" 2> /dev/null || true
  node_net_up "$1"
  # the fresh veth has a new MAC at the old address: the other namespaces (and the host
  # side) forget the old one, or their next connection to the node waits out a stale
  # neighbour entry and fails ("Communication connection failure" from srun)
  local addr other
  addr=$(node_addr "$1")
  ip neigh flush to "$addr" dev "$BRIDGE" 2> /dev/null || true
  for other in /run/netns/"$BRIDGE"-n*; do
    [ -e "$other" ] && [ "${other##*/}" != "$ns" ] || continue
    ip -n "${other##*/}" neigh flush to "$addr" 2> /dev/null || true
  done
}

# Removes every namespace and link named BRIDGE or BRIDGE-nI (with the names from
# net.env), also those of a start or stop that crashed half way. Without net.env this
# directory's start made nothing: a bridge of that name then belongs to someone else.
net_down() {
  [ -f "$DIR/net.env" ] || return 0
  local l
  for l in $(ip netns list 2> /dev/null | awk '{print $1}' | grep -xE "$BRIDGE-n[0-9]+"); do
    ip netns del "$l" || say "could not remove network namespace $l"
  done
  for l in $(ip -o link show 2> /dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -xE "$BRIDGE-n[0-9]+"); do
    ip link del "$l" 2> /dev/null || true # gone already with its namespace's end
  done
  if ip link show "$BRIDGE" > /dev/null 2>&1; then ip link del "$BRIDGE" || say "could not remove bridge $BRIDGE"; fi
  rm -f "$DIR/net.env"
}

write_conf() {
  mkdir -p "$DIR"/{etc,state,spool,tmp,log,pids,faults}
  local i nodes="" hosts
  hosts="127.0.0.1 localhost $(hostname -s 2> /dev/null || true)"$'\n'"$(ctl_addr) gritctl"$'\n'
  local feat parts="" g gs="" ctl ctlhost=localhost
  for i in $(seq "$NODES"); do
    mkdir -p "$DIR/spool/n$i" "$DIR/tmp/n$i"
    if [ "$NET" = netns ]; then
      hosts+="$(node_addr "n$i") n$i"$'\n'
      [ "$(layout_field "n$i" 2)" = worker ] || continue
      feat=$(layout_field "n$i" 4)
      nodes+="NodeName=n$i NodeHostname=n$i NodeAddr=$(node_addr "n$i") Port=$((PORT + i)) CPUs=$CPUS RealMemory=1000${feat:+ Features=$feat} State=UNKNOWN"$'\n'
    else
      nodes+="NodeName=n$i NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((PORT + i)) CPUs=$CPUS RealMemory=1000 State=UNKNOWN"$'\n'
    fi
  done
  if [ -n "$LAYOUT" ]; then
    # a partition per worker group, named after it; the first is the default
    for g in $(awk '$2 == "worker" { print $3 }' "$LAYOUT" | awk '!seen[$0]++'); do
      parts+="PartitionName=$g Nodes=$(awk -v g="$g" '$2 == "worker" && $3 == g { printf "%s%s", s, $1; s = "," }' "$LAYOUT")${gs:- Default=YES} MaxTime=INFINITE State=UP"$'\n'
      gs=" "
    done
  else
    parts="PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP"$'\n'
  fi
  ctl=$(ctl_node)
  [ -n "$ctl" ] && ctlhost=$ctl
  if [ "$NET" = netns ]; then
    # names resolve from this file, never from the machine's resolver
    printf '%s' "$hosts" > "$DIR/etc/hosts"
    : > "$DIR/etc/resolv.conf"
  fi
  : > "$DIR/etc/plugstack.conf"
  if [ -n "$PLUGIN" ]; then
    [ -f "$PLUGIN" ] || die "GRIT_SLURM_PLUGIN: $PLUGIN: no such file"
    echo "required $PLUGIN $PLUGIN_ARGS" > "$DIR/etc/plugstack.conf"
  fi
  # TaskProlog: its "export K=V" lines reach every task. The nodes share a kernel and
  # (local mode) a host name: each gets its own TMPDIR and OpenMPI shared-memory
  # directory (else their segment names collide), OpenMPI's TCP stays on loopback
  # (local) or on the node's veth (netns: lo would not reach the other nodes), and a
  # node marked with fault-node gets its health fault.
  local mpi_if=lo
  [ "$NET" = netns ] && mpi_if=$NODE_IF
  cat > "$DIR/etc/taskprolog.sh" <<EOF
#!/bin/sh
d="$DIR/tmp/\$SLURMD_NODENAME"
echo "export TMPDIR=\$d"
echo "export OMPI_MCA_btl_vader_backing_directory=\$d"
echo "export OMPI_MCA_btl_tcp_if_include=$mpi_if"
echo "export OMPI_MCA_oob_tcp_if_include=$mpi_if"
f="$DIR/faults/\$SLURMD_NODENAME"
[ -s "\$f" ] && echo "export GRIT_HEALTH_FAULT=\$(cat "\$f")"
exit 0
EOF
  chmod 0755 "$DIR/etc/taskprolog.sh"
  cat > "$CONF" <<EOF
# written by grit scripts/slurm-local-cluster.sh ($NODES nodes)
ClusterName=gritlocal
SlurmctldHost=$ctlhost($(ctl_addr))
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MSOCK,cred_expire=10
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
TmpFS=$DIR/tmp/%n
SlurmctldPidFile=$DIR/pids/slurmctld.pid
SlurmdPidFile=$DIR/pids/slurmd.%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.%n.log
PlugStackConfig=$DIR/etc/plugstack.conf
TaskProlog=$DIR/etc/taskprolog.sh
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1,bf_interval=1,permit_job_expansion
MpiDefault=none
ReturnToService=2
JobRequeue=1
SlurmdTimeout=5
SlurmctldTimeout=10
MessageTimeout=5
InactiveLimit=0
KillWait=2
MinJobAge=300
${nodes}${parts}
EOF
}

munge_start() {
  install -d -o munge -g munge -m 0755 "$DIR/munge" # others must reach the socket
  runuser -u munge -- test -x "$DIR/munge" ||
    die "user munge cannot reach $DIR/munge: every directory above it must be o+x"
  if [ ! -s "$DIR/munge/key" ]; then
    (umask 077 && head -c 1024 /dev/urandom > "$DIR/munge/key")
    chown munge:munge "$DIR/munge/key"
    chmod 0400 "$DIR/munge/key"
  fi
  runuser -u munge -- /usr/sbin/munged --socket="$MSOCK" --key-file="$DIR/munge/key" \
    --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/munge/munged.log" \
    --seed-file="$DIR/munge/seed" || die "munged did not start ($DIR/munge/munged.log)"
  local i
  for i in $(seq 50); do
    munge -n -S "$MSOCK" 2>/dev/null | unmunge -S "$MSOCK" > /dev/null 2>&1 && return 0
    sleep 0.1
  done
  die "munged does not answer on $MSOCK"
}

ctld_start() {
  local argv=(slurmctld -D -i)
  # netns: the host's network namespace (it owns SUBNET.1 on the bridge), but its own
  # mount namespace with the cluster's hosts file
  [ "$NET" = netns ] && argv=(unshare --mount --propagation private sh -c \
    'mount --bind "$0/etc/hosts" /etc/hosts && exec slurmctld -D -i' "$DIR")
  # a controller node of the layout: slurmctld in that node's namespaces, under its name
  local c
  c=$(ctl_node)
  [ -n "$c" ] && argv=(nsenter --net="/run/netns/$(node_ns "$c")" unshare --mount --uts --propagation private \
    sh -c 'hostname "$1" && mount --bind "$0/etc/hosts" /etc/hosts &&
      mount --bind "$0/etc/resolv.conf" /etc/resolv.conf && exec slurmctld -D -i' "$DIR" "$c")
  PIDFILE=$DIR/pids/slurmctld.host.pid LOGFILE=$DIR/log/slurmctld.out detach "${argv[@]}"
  local i
  for i in $(seq 100); do
    scontrol ping 2>/dev/null | grep 'is UP' > /dev/null && return 0
    pidof_file "$DIR/pids/slurmctld.host.pid" slurmctld > /dev/null || die "slurmctld died ($DIR/log/slurmctld.log)"
    sleep 0.1
  done
  die "slurmctld does not answer ($DIR/log/slurmctld.log)"
}

# A node: unshare (PID+mount namespace, --kill-child) -> sh as the namespace's PID 1
# (reaps orphans) -> slurmd -D -N nI. SIGKILL of the unshare process ends the node.
# netns: nsenter --net puts the unshare (same PID: nsenter execs it) into the node's
# network namespace, --uts gives it its host name, and the mount namespace gets the
# cluster's hosts file and an empty resolv.conf.
node_start() {
  local n=$1
  [ "$(layout_field "$n" 2)" = worker ] || die "$n is a $(layout_field "$n" 2) node of the layout: it runs no slurmd"
  node_init "$n" > /dev/null && return 0
  mkdir -p "$DIR/spool/$n" "$DIR/tmp/$n"
  if [ "$NET" = netns ]; then
    [ -e "/run/netns/$(node_ns "$n")" ] || die "network namespace $(node_ns "$n") is missing (stop, then start again)"
    PIDFILE=$DIR/pids/node.$n.pid LOGFILE=$DIR/log/node.$n.out detach \
      nsenter --net="/run/netns/$(node_ns "$n")" unshare --pid --fork --mount-proc --kill-child --uts \
      sh -c 'hostname "$1" && mount --bind "$2/etc/hosts" /etc/hosts &&
        mount --bind "$2/etc/resolv.conf" /etc/resolv.conf || exit 1
        mkdir -p "$2/sys/$1" && mount -t sysfs sysfs "$2/sys/$1" &&
        mount --bind "$2/sys/$1/class/net" /sys/class/net &&
        mount --bind "$2/sys/$1/devices/virtual/net" /sys/devices/virtual/net || exit 1
        slurmd -D -N "$1" & while :; do wait; sleep 1; done' gritnode "$n" "$DIR"
  else
    PIDFILE=$DIR/pids/node.$n.pid LOGFILE=$DIR/log/node.$n.out detach \
      unshare --pid --fork --mount-proc --kill-child \
      sh -c 'slurmd -D -N "$1" & while :; do wait; sleep 1; done' gritnode "$n"
  fi
}
node_init() { # host PID of the node's PID 1
  local w c
  w=$(pidof_file "$DIR/pids/node.$1.pid" unshare) || return 1
  c=$(awk '{print $1}' "/proc/$w/task/$w/children" 2>/dev/null)
  [ -n "$c" ] && live "$c" && echo "$c"
}
node_pids() { # every host PID in the node's PID namespace
  local init ns
  init=$(node_init "$1") || return 0
  ns=$(readlink "/proc/$init/ns/pid") || return 0
  # one find over every process (a readlink per process took seconds on a busy host,
  # long enough for a short job to end before freeze-node stopped it)
  local pat=${ns//\[/\\[}
  pat=${pat//\]/\\]}
  # find exits 1 when a process ends while it looks (a busy node always has some): under
  # pipefail and set -e that ended this script with the list printed but status 1
  find /proc/[0-9]*/ns/pid -maxdepth 0 -lname "$pat" 2>/dev/null | cut -d/ -f3 || true
  return 0
}
node_kill() {
  local n=$1 w init
  init=$(node_init "$n") || true
  w=$(pidof_file "$DIR/pids/node.$n.pid" unshare) || true
  [ -n "$init" ] && kill -KILL "$init" 2>/dev/null
  [ -n "$w" ] && kill -KILL "$w" 2>/dev/null
  local i
  for i in $(seq 50); do
    { [ -n "$w" ] && live "$w"; } || { [ -n "$init" ] && live "$init"; } || break
    sleep 0.1
  done
  rm -f "$DIR/pids/node.$n.pid"
}

wait_idle() {
  local i states want
  want=$(workers | wc -l)
  for i in $(seq 300); do
    states=$(sinfo -h -N -o '%N %T' 2>/dev/null | sort -u)
    if [ "$(grep -cE ' (idle|mixed|allocated|drained|draining)$' <<< "$states")" -ge "$want" ]; then
      return 0
    fi
    sleep 0.2
  done
  say "nodes not idle after 60 s:"; echo "$states" >&2
  return 1
}

do_start() {
  [ "$(id -u)" = 0 ] || die "must run as root (slurmd, munge and namespaces need it)"
  [[ $NODES =~ ^[0-9]+$ ]] && [ "$NODES" -ge 1 ] && [ "$NODES" -le 32 ] || die "GRIT_SLURM_NODES: expected 1..32, got '$NODES'"
  [[ $PORT =~ ^[0-9]+$ ]] && [ "$PORT" -ge 1024 ] && [ "$PORT" -le 65000 ] || die "GRIT_SLURM_PORT: expected 1024..65000, got '$PORT'"
  for b in slurmctld slurmd munged scontrol unshare; do
    command -v "$b" > /dev/null || [ -x "/usr/sbin/$b" ] || die "$b not found (scripts/install-deps.sh)"
  done
  check_net_settings
  unshare --pid --fork --mount-proc true 2> /dev/null || die "cannot create PID namespaces here"
  if pidof_file "$DIR/pids/slurmctld.host.pid" slurmctld > /dev/null; then
    die "a cluster already runs in $DIR (stop it first)"
  fi
  local t0=$SECONDS p i
  for p in $(seq "$PORT" $((PORT + NODES))); do
    ss -Htln "sport = :$p" | grep . > /dev/null && die "TCP port $p is in use (a cluster left running? run stop with the same GRIT_SLURM_DIR, or set GRIT_SLURM_PORT)"
  done
  mkdir -p "$DIR"
  [ -f "$DIR/net.env" ] && die "$DIR/net.env: a network of an earlier cluster may be left (run stop first)"
  rm -rf "$DIR"/{state,spool,tmp,pids,log,faults}
  write_conf
  if [ -n "$LAYOUT" ]; then
    cp "$LAYOUT" "$DIR/etc/layout" # the copy outlives the caller's file
    LAYOUT=$DIR/etc/layout
  fi
  cat > "$DIR/cluster.env" <<EOF
GRIT_SLURM_NODES=$NODES GRIT_SLURM_PORT=$PORT GRIT_SLURM_CPUS=$CPUS
GRIT_SLURM_NET=$NET GRIT_SLURM_BRIDGE=$BRIDGE GRIT_SLURM_SUBNET=$SUBNET
GRIT_SLURM_LAYOUT=$LAYOUT
EOF
  net_up
  munge_start
  ctld_start
  if [ "$DEFER" = 1 ]; then
    say "up: network, munge and slurmctld ($NODES nodes, none started) in $((SECONDS - t0)) s"
    return 0
  fi
  for n in $(workers); do node_start "$n"; done
  wait_idle || die "cluster did not become idle (logs in $DIR/log)"
  say "up: $NODES nodes ($NET network) in $((SECONDS - t0)) s; export SLURM_CONF=$CONF"
}

# This cluster's daemons found without pid files (deleted, or a crashed script): node
# wrappers and slurmctld run with $DIR as their working directory, munged with its socket
# on the command line.
strays() {
  local p d
  for p in /proc/[0-9]*; do
    case $(cat "$p/comm" 2>/dev/null) in
      unshare | slurmctld)
        d=$(readlink "$p/cwd" 2>/dev/null) || continue
        [ "$d" = "$DIR" ] && echo "${p#/proc/}" ;;
      munged) tr '\0' ' ' < "$p/cmdline" 2>/dev/null | grep -F -- "--socket=$MSOCK" > /dev/null && echo "${p#/proc/}" ;;
    esac
  done
  return 0
}

do_stop() {
  local i p f
  # clients of this cluster (srun, sbatch waiting with --wait) first
  for f in /proc/[0-9]*/environ; do
    p=${f#/proc/}; p=${p%/environ}
    case $(cat "/proc/$p/comm" 2>/dev/null) in
      srun | sbatch | salloc) grep -qzxF "SLURM_CONF=$CONF" "$f" 2>/dev/null && kill -KILL "$p" 2>/dev/null ;;
    esac
  done
  for i in $(seq "$NODES"); do node_kill "n$i"; done
  if p=$(pidof_file "$DIR/pids/slurmctld.host.pid" slurmctld); then end_pid "$p"; fi
  if p=$(pidof_file "$DIR/munge/munged.pid" "$MSOCK"); then end_pid "$p"; fi
  for p in $(strays); do
    say "stopping stray process $p ($(cat "/proc/$p/comm" 2>/dev/null)) of $DIR"
    end_pid "$p"
  done
  net_down
  rm -f "$DIR"/pids/*.pid "$DIR/munge/munged.pid" "$DIR/cluster.env"
  say "stopped"
}

do_status() {
  local p i
  echo "dir $DIR  SLURM_CONF=$CONF"
  if [ "$NET" = netns ]; then
    echo "net netns: bridge $BRIDGE $SUBNET.1/24 ($(ip link show "$BRIDGE" > /dev/null 2>&1 && echo present || echo missing))"
  else
    echo "net local: every node on 127.0.0.1"
  fi
  if p=$(pidof_file "$DIR/munge/munged.pid" "$MSOCK"); then echo "munged     pid $p"; else echo "munged     down"; fi
  if p=$(pidof_file "$DIR/pids/slurmctld.host.pid" slurmctld); then echo "slurmctld  pid $p"; else echo "slurmctld  down"; fi
  for i in $(seq "$NODES"); do
    if [ "$(layout_field "n$i" 2)" != worker ]; then echo -n "n$i         $(layout_field "n$i" 2) node"
    elif p=$(node_init "n$i"); then echo -n "n$i         up ($(node_pids "n$i" | wc -l) processes)"; else echo -n "n$i         down"; fi
    if [ "$NET" = netns ]; then
      if ip -o link show "$(node_ns "n$i")" 2> /dev/null | grep -q '[<,]UP[,>]'; then
        echo "  $(node_addr "n$i")"
      else
        echo "  $(node_addr "n$i") partitioned (veth down)"
      fi
    else
      echo
    fi
  done
  pidof_file "$DIR/pids/slurmctld.host.pid" slurmctld > /dev/null && sinfo -N -o '%N %T %E' || true
}

signal_node() {
  local p pids
  pids=$(node_pids "$2")
  [ -n "$pids" ] || die "node $2 is not running"
  for p in $pids; do kill -"$1" "$p" 2>/dev/null || true; done
}

case $cmd in
  start) do_start ;;
  stop) do_stop ;;
  status) do_status ;;
  env) echo "export SLURM_CONF=$CONF" ;;
  kill-node)
    need_node "${1:-}"
    node_init "$1" > /dev/null || die "node $1 is not running"
    node_kill "$1"; say "$1 killed" ;;
  start-node) need_node "${1:-}"; node_start "$1"; say "$1 started" ;;
  freeze-node) need_node "${1:-}"; signal_node STOP "$1"; say "$1 frozen" ;;
  thaw-node) need_node "${1:-}"; signal_node CONT "$1"; say "$1 thawed" ;;
  fault-node)
    need_node "${1:-}"
    [[ ${2:-} =~ ^[a-z_,-]+$ ]] || die "fault-node NODE FAULT: expected a grit health fault name (or -), got '${2:-}'"
    if [ "$2" = - ]; then rm -f "$DIR/faults/$1"; else echo "$2" > "$DIR/faults/$1"; fi ;;
  partition-node | heal-node)
    need_node "${1:-}"
    [ "$NET" = netns ] || die "$cmd needs a cluster started with GRIT_SLURM_NET=netns"
    if [ "$cmd" = partition-node ]; then
      ip link set "$(node_ns "$1")" down; say "$1 partitioned (cut off the bridge $BRIDGE)"
    else
      ip link set "$(node_ns "$1")" up; say "$1 healed"
    fi ;;
  slow-link)
    need_node "${1:-}"
    [ "$NET" = netns ] || die "slow-link needs a cluster started with GRIT_SLURM_NET=netns"
    [[ ${2:-} =~ ^([0-9]+(\.[0-9]+)?[kmg]?bit|-)$ ]] || die "slow-link NODE RATE: expected a tc rate like 4mbit or 500kbit (or -), got '${2:-}'"
    ns=$(node_ns "$1")
    tc qdisc del dev "$ns" root 2> /dev/null || true
    nsenter --net="/run/netns/$ns" tc qdisc del dev eth0 root 2> /dev/null || true
    if [ "$2" != - ]; then
      tc qdisc add dev "$ns" root tbf rate "$2" burst 16kb latency 400ms || die "tc tbf on $ns failed"
      nsenter --net="/run/netns/$ns" tc qdisc add dev eth0 root tbf rate "$2" burst 16kb latency 400ms ||
        die "tc tbf on $1's eth0 failed"
      say "$1's link limited to $2 both ways"
    else
      say "$1's link unlimited"
    fi ;;
  node-addr) need_node "${1:-}"; node_addr "$1" ;;
  node-exec)
    need_node "${1:-}"
    [ "$NET" = netns ] || die "node-exec needs a cluster started with GRIT_SLURM_NET=netns"
    n=$1; shift
    [ $# -gt 0 ] || die "node-exec NODE CMD...: no command"
    # a node marked with fault-node fails its grit health here too (admission checks)
    [ -s "$DIR/faults/$n" ] && export GRIT_HEALTH_FAULT="$(cat "$DIR/faults/$n")"
    exec nsenter --net="/run/netns/$(node_ns "$n")" unshare --mount --uts --propagation private \
      sh -c 'hostname "$1" && mount --bind "$2/etc/hosts" /etc/hosts &&
        mount --bind "$2/etc/resolv.conf" /etc/resolv.conf || exit 125; shift 2; exec "$@"' \
      gritnode "$n" "$DIR" "$@" ;;
  renew-node)
    need_node "${1:-}"
    [ "$NET" = netns ] || die "renew-node needs a cluster started with GRIT_SLURM_NET=netns"
    node_kill "$1"
    node_net_renew "$1"
    rm -rf "${DIR:?}/spool/$1" "${DIR:?}/tmp/$1" # a fault-node mark stays with the slot
    mkdir -p "$DIR/spool/$1" "$DIR/tmp/$1"
    say "$1 renewed (stopped, fresh network namespace)" ;;
  wait-node)
    need_node "${1:-}"
    [[ ${2:-30} =~ ^[0-9]+$ ]] || die "wait-node NODE SECONDS: expected a number of seconds, got '$2'"
    for _ in $(seq $((${2:-30} * 5))); do
      st=$(sinfo -h -N -n "$1" -o '%T' 2> /dev/null | head -1)
      case $st in idle | mixed | allocated | completing | drained | draining | reserved) exit 0 ;; esac
      sleep 0.2
    done
    die "$1 is not up after ${2:-30} s (state '${st:-?}')" ;;
  reconfigure)
    [ -f "$DIR/cluster.env" ] || die "no cluster runs in $DIR"
    [ -n "${GRIT_SLURM_LAYOUT_NEW:-}" ] || die "reconfigure: set GRIT_SLURM_LAYOUT_NEW to the new layout"
    [ -f "$GRIT_SLURM_LAYOUT_NEW" ] || die "reconfigure: $GRIT_SLURM_LAYOUT_NEW: no such file"
    [[ ${GRIT_SLURM_NODES_NEW:-} =~ ^[0-9]+$ ]] && [ "$GRIT_SLURM_NODES_NEW" -ge 1 ] && [ "$GRIT_SLURM_NODES_NEW" -le 32 ] ||
      die "reconfigure: GRIT_SLURM_NODES_NEW: expected 1..32, got '${GRIT_SLURM_NODES_NEW:-}'"
    cp "$GRIT_SLURM_LAYOUT_NEW" "$DIR/etc/layout"
    LAYOUT=$DIR/etc/layout NODES=$GRIT_SLURM_NODES_NEW
    sed -i "s/^GRIT_SLURM_NODES=[0-9]*/GRIT_SLURM_NODES=$NODES/" "$DIR/cluster.env"
    write_conf # hosts rewritten in place: the nodes' bind mounts see it
    for i in $(seq "$NODES"); do
      [ "$(layout_field "n$i" 2)" = absent ] && continue
      [ -e "/run/netns/$(node_ns "n$i")" ] || node_net_up "n$i"
    done
    if p=$(pidof_file "$DIR/pids/slurmctld.host.pid" slurmctld); then end_pid "$p"; fi
    ctld_start # node definitions change only with a restart; state (jobs) is kept
    scontrol reconfigure > /dev/null 2>&1 || true
    say "reconfigured: $NODES slots" ;;
  remove-node)
    need_node "${1:-}"
    node_kill "$1"
    ns=$(node_ns "$1")
    if [ -e "/run/netns/$ns" ]; then ip netns del "$ns" || die "could not remove network namespace $ns"; fi
    ip link del "$ns" 2> /dev/null || true
    say "$1 removed" ;;
  ping) [ -f "$DIR/cluster.env" ] && pidof_file "$DIR/pids/slurmctld.host.pid" slurmctld > /dev/null &&
    scontrol ping 2> /dev/null | grep -q 'is UP' ;;
  node-pids) need_node "${1:-}"; node_pids "$1" ;;
  help | -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' ;;
  *) say "unknown command '$cmd' (try --help)"; exit 2 ;;
esac
