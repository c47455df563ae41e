#!/usr/bin/env bash
# A real one-node SLURM cluster (Debian's slurmctld + slurmd + munge) for tests and demos, as root,
# without systemd. Everything it writes (slurm.conf, munge key and socket, spool, logs, pid files)
# lives in one folder: $PHOENIX_SLURM_DIR, default /tmp/phoenix-keypoints-slurm.
#
#   scripts/slurm-cluster.sh start    # install the packages if needed, start (or reuse) the cluster
#   scripts/slurm-cluster.sh status   # exit 0 if it answers, 1 if not
#   scripts/slurm-cluster.sh stop     # cancel its jobs, stop the daemons it started (pid files)
#
# `start` prints `export SLURM_CONF=...` (clients need it: `eval "$(scripts/slurm-cluster.sh start)"`)
# and `export PHOENIX_SLURM_STARTED=1` when it started a daemon, 0 when the cluster already ran.
# Exit 3 with one line on stderr when a cluster cannot be had here (not root, no apt-get), so tests
# can skip with that reason; exit 1 when it should work but did not (the log to read is named).
# slurmctld and slurmd listen on 6817/6818, fixed per machine: one such cluster at a time.
set -uo pipefail

STATE="${PHOENIX_SLURM_DIR:-/tmp/phoenix-keypoints-slurm}"
CONF="$STATE/slurm.conf"
export SLURM_CONF="$CONF"  # daemons and clients alike
SOCKET="$STATE/munge/munge.socket.2"
HERE="$(cd "$(dirname "$0")" && pwd)"
DAEMONS=(munged slurmctld slurmd)

die() { echo "slurm-cluster: ${*:2}" >&2; exit "$1"; }

# pid of a daemon this script started, if that process still runs that program
our_pid() {
  local pid
  pid="$(cat "$STATE/run/$1.pid" 2>/dev/null)" || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$1" ] && echo "$pid"
}

answers() { timeout 10 sinfo -h -o %T 2>/dev/null; }

write_munge_key() {
  [ -s "$STATE/munge/munge.key" ] && return 0
  (umask 077 && head -c 1024 /dev/urandom >"$STATE/munge/munge.key")
  chmod 0400 "$STATE/munge/munge.key"
}

write_conf() {
  local node host
  # slurmd's own view of this machine (name, CPUs, sockets, cores, memory): never more than it has
  node="$(slurmd -C | head -1)"
  host="$(echo "$node" | sed -n 's/^NodeName=\([^ ]*\).*/\1/p')"
  [ -n "$host" ] || die 1 "slurmd -C printed no NodeName: $node"
  cat >"$CONF" <<EOF
# written by scripts/slurm-cluster.sh; rewritten on each start
ClusterName=phoenix-test
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCKET
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/run/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
KillWait=10
MinJobAge=600
SlurmctldTimeout=30
SlurmdTimeout=30
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

start_daemon() {
  local name="$1"
  shift
  our_pid "$name" >/dev/null && return 0
  # 8>&-: a daemon must not inherit the start/stop lock, or it holds it for its whole life
  "$@" >>"$STATE/log/$name.start.log" 2>&1 </dev/null 8>&- ||
    die 1 "$name did not start: see $STATE/log/$name.start.log and $STATE/log/$name.log"
  STARTED=1
}

wait_idle() {
  local i state
  for i in $(seq 1 60); do
    state="$(answers)"
    case "$state" in idle | mixed | allocated | completing) return 0 ;; esac  # "idle*": not responding
    sleep 0.5
  done
  die 1 "the node did not become idle in 30 s (sinfo: '${state:-no answer}'); logs in $STATE/log"
}

start() {
  [ "$(id -u)" -eq 0 ] || die 3 "a test cluster runs its daemons as root (this is uid $(id -u))"
  "$HERE/system-deps.sh" slurm || exit $?  # exit 3 with the reason when it cannot install
  mkdir -p "$STATE"/{munge,ctld,spool,run,log} && chmod 0700 "$STATE" "$STATE/munge"
  exec 8>"$STATE/lock"
  flock 8  # one start/stop at a time: parallel test sessions may both ask
  STARTED=0
  local all=1 d
  for d in "${DAEMONS[@]}"; do our_pid "$d" >/dev/null || all=0; done
  if [ "$all" = 0 ] || ! answers >/dev/null; then
    if ! our_pid slurmctld >/dev/null && (exec 3<>/dev/tcp/127.0.0.1/6817) 2>/dev/null; then
      die 1 "port 6817 is taken by a slurmctld this script did not start ($STATE/run has no" \
        "live pid for it); stop that cluster first"
    fi
    write_munge_key
    our_pid slurmctld >/dev/null || write_conf
    start_daemon munged munged --force --socket="$SOCKET" --key-file="$STATE/munge/munge.key" \
      --pid-file="$STATE/run/munged.pid" --log-file="$STATE/log/munged.log" \
      --seed-file="$STATE/munge/munged.seed"
    start_daemon slurmctld slurmctld -c  # -c: no jobs left over from an earlier cluster
    start_daemon slurmd slurmd
  fi
  wait_idle
  echo "export SLURM_CONF=$CONF"
  echo "export PHOENIX_SLURM_STARTED=$STARTED"
  echo "slurm-cluster: $([ "$STARTED" = 1 ] && echo started || echo reused) one-node cluster" \
    "$(answers) ($CONF; stop: $0 stop)" >&2
}

stop() {
  [ -d "$STATE/run" ] || { echo "slurm-cluster: nothing started here ($STATE)" >&2; return 0; }
  exec 8>"$STATE/lock"
  flock 8
  if our_pid slurmctld >/dev/null && answers >/dev/null; then
    # jobs of this cluster would outlive its daemons (slurmstepd): end them first
    squeue -h -o %A | sort -u | xargs -r scancel
    for _ in $(seq 1 40); do
      [ -z "$(squeue -h -t running,completing -o %i 2>/dev/null)" ] && break
      sleep 0.5
    done
  fi
  local d pid pids=()
  for d in slurmd slurmctld munged; do  # each takes ~2 s to exit: signal all, then wait
    if pid="$(our_pid "$d")" && kill -TERM "$pid"; then
      pids+=("$pid")
      echo "slurm-cluster: stopping $d (pid $pid)" >&2
    fi
    rm -f "$STATE/run/$d.pid"
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  done
  return 0
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) answers || { echo "slurm-cluster: no cluster answers at $CONF" >&2; exit 1; } ;;
  *) die 2 "usage: $0 start|stop|status (state in $STATE; \$PHOENIX_SLURM_DIR moves it)" ;;
esac
