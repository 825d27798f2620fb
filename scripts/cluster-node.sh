#!/usr/bin/env bash
# cluster-node.sh - the host side of `grit cluster`'s ssh provider (src/cluster/ssh.c).
# grit copies it with scp into Ssh.RemoteDir on every host of the cluster, with the
# cluster's slurm.conf and munge.key (moved here to etc/slurm.conf and munge/key), and
# runs it over ssh as root. Everything it makes lives in its own folder (RD, the script's folder):
#
#   cluster-node.sh munge            munged with the cluster's key (started once)
#   cluster-node.sh ctld             slurmctld (started once), waits until it answers
#   cluster-node.sh slurmd NODE      slurmd -N NODE in its own PID namespace (started once)
#   cluster-node.sh stop-node NODE   SIGKILL of the node's PID namespace (slurmd, its jobs)
#   cluster-node.sh renew NODE       stop-node, then the node's spool and tmp wiped
#   cluster-node.sh wait NODE S      until slurmctld sees NODE up (S seconds at most)
#   cluster-node.sh reconfigure      slurmctld restarted with the new slurm.conf
#   cluster-node.sh slurm CMD...     a Slurm client (sinfo, scontrol, srun) with SLURM_CONF
#   cluster-node.sh down             every process above ended by PID, RD removed
#
# Processes are found by pid files whose process still runs with RD on its command line
# or as its working directory, so a stale pid file never names a stranger.
set -euo pipefail
RD=$(cd "$(dirname "$0")" && pwd)
CONF=$RD/etc/slurm.conf
MSOCK=$RD/munge/socket
export SLURM_CONF=$CONF
cmd=${1:-help}
[ $# -gt 0 ] && shift
die() { echo "cluster-node ($(hostname)): error: $*" >&2; exit 1; }
live() { local s; s=$(awk '{print $3}' "/proc/$1/stat" 2> /dev/null) && [ -n "$s" ] && [ "$s" != Z ]; }
# PID from FILE when it lives and is ours (RD on its command line or its cwd)
ours() {
  local p
  [ -s "$1" ] || return 1
  p=$(cat "$1")
  [[ $p =~ ^[0-9]+$ ]] && live "$p" || return 1
  { tr '\0' ' ' < "/proc/$p/cmdline" | grep -qF -- "$RD" || [ "$(readlink "/proc/$p/cwd")" = "$RD" ]; } && echo "$p"
}
end_pid() { # SIGTERM, 2 s, SIGKILL
  local i
  kill -TERM "$1" 2> /dev/null || return 0
  for i in $(seq 20); do live "$1" || return 0; sleep 0.1; done
  kill -KILL "$1" 2> /dev/null || true
}
# detach PIDFILE LOG CMD...: its own session, cwd RD, no terminal
detach() {
  local pf=$1 log=$2 i
  shift 2
  rm -f "$pf"
  (cd "$RD" && exec setsid sh -c 'echo $$ > "$0"; exec "$@"' "$pf" "$@" < /dev/null >> "$log" 2>&1) &
  for i in $(seq 100); do [ -s "$pf" ] && return 0; sleep 0.02; done
  die "could not start $1"
}
node_ok() { [[ ${1:-} =~ ^n[0-9]+$ ]] || die "expected a node name nI, got '${1:-}'"; }
mkdir -p "$RD"/{log,pids,spool,tmp,state,etc}
# what grit just copied in
[ -f "$RD/slurm.conf" ] && mv -f "$RD/slurm.conf" "$CONF"

case $cmd in
  munge)
    install -d -o munge -g munge -m 0755 "$RD/munge"
    if [ -s "$RD/munge.key" ]; then
      if ! cmp -s "$RD/munge.key" "$RD/munge/key"; then rm -f "$RD/munge/key"; mv -f "$RD/munge.key" "$RD/munge/key"; fi
      rm -f "$RD/munge.key"
    fi
    ours "$RD/munge/munged.pid" > /dev/null && exit 0
    [ -s "$RD/munge/key" ] || die "$RD/munge/key: no munge key (grit copies it)"
    chown munge:munge "$RD/munge/key" && chmod 0400 "$RD/munge/key"
    runuser -u munge -- test -x "$RD/munge" || die "user munge cannot reach $RD/munge (every folder above must be o+x)"
    runuser -u munge -- /usr/sbin/munged --socket="$MSOCK" --key-file="$RD/munge/key" \
      --pid-file="$RD/munge/munged.pid" --log-file="$RD/munge/munged.log" \
      --seed-file="$RD/munge/seed" < /dev/null >> "$RD/munge/munged.out" 2>&1 || die "munged did not start ($RD/munge/munged.log)"
    for _ in $(seq 50); do
      munge -n -S "$MSOCK" 2> /dev/null | unmunge -S "$MSOCK" > /dev/null 2>&1 && exit 0
      sleep 0.1
    done
    die "munged does not answer on $MSOCK" ;;
  ctld | reconfigure)
    if p=$(ours "$RD/pids/slurmctld.pid"); then
      [ "$cmd" = ctld ] && exit 0
      end_pid "$p"
    fi
    detach "$RD/pids/slurmctld.pid" "$RD/log/slurmctld.out" slurmctld -D -i -f "$CONF"
    for _ in $(seq 100); do
      if scontrol ping 2> /dev/null | grep -q 'is UP'; then
        [ "$cmd" = reconfigure ] && { scontrol reconfigure > /dev/null 2>&1 || true; }
        exit 0
      fi
      ours "$RD/pids/slurmctld.pid" > /dev/null || die "slurmctld died ($RD/log/slurmctld.log)"
      sleep 0.1
    done
    die "slurmctld does not answer ($RD/log/slurmctld.log)" ;;
  slurmd)
    node_ok "${1:-}"
    ours "$RD/pids/node.$1.pid" > /dev/null && exit 0
    mkdir -p "$RD/spool/$1" "$RD/tmp/$1"
    # a PID namespace of its own: stop-node ends the node's jobs with it
    detach "$RD/pids/node.$1.pid" "$RD/log/node.$1.out" unshare --pid --fork --mount-proc --kill-child \
      sh -c 'slurmd -D -N "$1" -f "$2" & while :; do wait; sleep 1; done' gritnode "$1" "$CONF" ;;
  stop-node | renew)
    node_ok "${1:-}"
    if p=$(ours "$RD/pids/node.$1.pid"); then
      kill -KILL "$p" 2> /dev/null || true # --kill-child: the namespace's processes go with it
      for _ in $(seq 50); do live "$p" || break; sleep 0.1; done
    fi
    rm -f "$RD/pids/node.$1.pid"
    [ "$cmd" = renew ] && rm -rf "${RD:?}/spool/$1" "${RD:?}/tmp/$1"
    exit 0 ;;
  wait)
    node_ok "${1:-}"
    [[ ${2:-30} =~ ^[0-9]+$ ]] || die "wait NODE SECONDS: expected seconds, got '$2'"
    for _ in $(seq $((${2:-30} * 5))); do
      st=$(sinfo -h -N -n "$1" -o '%T' 2> /dev/null | head -1)
      case $st in idle | mixed | allocated | completing | drained | draining | reserved) exit 0 ;; esac
      sleep 0.2
    done
    die "$1 is not up after ${2:-30} s (state '${st:-?}')" ;;
  slurm)
    case ${1:-} in sinfo | scontrol | squeue | srun | sbatch | scancel) ;; *) die "slurm: not a Slurm client: '${1:-}'" ;; esac
    exec "$@" ;;
  down)
    for f in "$RD"/pids/node.*.pid; do
      [ -e "$f" ] || continue
      if p=$(ours "$f"); then kill -KILL "$p" 2> /dev/null || true; fi
    done
    if p=$(ours "$RD/pids/slurmctld.pid"); then end_pid "$p"; fi
    if p=$(ours "$RD/munge/munged.pid"); then end_pid "$p"; fi
    for f in "$RD"/pids/node.*.pid; do
      [ -e "$f" ] || continue
      if p=$(ours "$f"); then for _ in $(seq 50); do live "$p" || break; sleep 0.1; done; fi
    done
    cd /
    rm -rf --one-file-system "${RD:?}"
    [ ! -e "$RD" ] || die "could not remove $RD" ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; [ "$cmd" = help ] ;;
esac
