#!/usr/bin/env bash
# A real N-node Slurm cluster on this one host (3 by default), for trainready's tests and CI.
#
#   scripts/local-slurm.sh up [--nodes N]   install (apt) what is missing, write the config, start munged,
#                                           slurmctld and one slurmd per node (node1..nodeN); idempotent;
#                                           a cluster up with another N is reconfigured to N.
#                                           LOCAL_SLURM_NO_INSTALL=1: install nothing (the test suite's fixture
#                                           sets it: tests never change the host's packages); missing
#                                           slurm-wlm/munge is then a "cannot start" line
#   scripts/local-slurm.sh down             stop the daemons this script started, remove its state and logs
#   scripts/local-slurm.sh status           exit 0 when sinfo shows the nodes up, else 1 (with the reason)
#
# Largest N measured on a 2-core x86 VM with 24 GiB: see docs/cluster.md ("The fleet at scale"); each idle
# slurmd holds a few MiB, so memory is not what bounds N: the tasks' own processes are.
#
# All "nodes" are this host (NodeHostname=$(hostname -s), one slurmd each on ports 17001-(17000+N)),
# so a node's identity inside a job is $SLURMD_NODENAME, never the hostname.  The facts used here
# (Debian's slurm-wlm 22.05 + munge, multiple slurmd per host with `slurmd -N`) are from the Slurm
# docs (slurm.conf(5), "Multiple slurmd support") and were checked on a Debian 12 host.
#
# When it cannot start (not root, no apt-get, installs forbidden, a foreign slurm.conf) it prints ONE line starting with
# "local-slurm: cannot start:" and exits 3, so the tests skip with that reason.
set -u

NODES=${LOCAL_SLURM_NODES:-3}
MAX_NODES=1000  # ports 17001..18000; far above what one small host holds
CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
MARK="# written by trainready scripts/local-slurm.sh"
STATE=/var/lib/trainready-local-slurm
LOG=/var/log/trainready-local-slurm
HOST=$(hostname -s)

cannot() { echo "local-slurm: cannot start: $*"; exit 3; }
say() { echo "local-slurm: $*" >&2; }

# A daemon started here must not inherit this script's open files: under `flock LOCK scripts/local-slurm.sh up`
# the lock's descriptor would live on in munged/slurmd and hold the lock until they exit.
detached() {
    (
        for fd in /proc/$BASHPID/fd/*; do
            fd=${fd##*/}
            case "$fd" in ''|*[!0-9]*) continue ;; esac
            [ "$fd" -gt 2 ] && eval "exec $fd>&-" 2>/dev/null
        done
        exec "$@"
    )
}

need_root() { [ "$(id -u)" = 0 ] || cannot "needs root (to install slurm-wlm/munge and run slurmd); run as root or in CI"; }

ensure_packages() {
    local missing=()
    for b in slurmctld slurmd sbatch munged; do command -v "$b" >/dev/null 2>&1 || missing+=("$b"); done
    [ ${#missing[@]} = 0 ] && return 0
    [ "${LOCAL_SLURM_NO_INSTALL:-0}" = 1 ] && cannot "missing ${missing[*]} and LOCAL_SLURM_NO_INSTALL=1 (installs nothing): apt-get install slurm-wlm munge first"
    command -v apt-get >/dev/null 2>&1 || cannot "missing ${missing[*]} and no apt-get to install slurm-wlm munge"
    say "installing slurm-wlm munge (missing: ${missing[*]})"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge; } \
        >"${TMPDIR:-/tmp}/local-slurm-apt.log" 2>&1 || cannot "apt-get install slurm-wlm munge failed (see ${TMPDIR:-/tmp}/local-slurm-apt.log)"
}

ensure_munge() {
    mkdir -p /etc/munge /var/lib/munge /var/log/munge /run/munge
    if [ ! -s /etc/munge/munge.key ]; then
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=128 status=none
    fi
    chown -R munge:munge /etc/munge /var/lib/munge /var/log/munge /run/munge 2>/dev/null
    chmod 0400 /etc/munge/munge.key
    chmod 0700 /etc/munge
    if ! munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
        # --force: start even if a stale socket from an earlier run is left behind
        (detached su -s /bin/sh munge -c "munged --force" 2>/dev/null || detached munged --force) \
            || cannot "munged does not start (see /var/log/munge/munged.log)"
        sleep 0.5
        munge -n </dev/null | unmunge >/dev/null 2>&1 || cannot "munge does not encode/decode (see /var/log/munge/munged.log)"
    fi
}

write_conf() {
    if [ -f "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
        cannot "$CONF exists and was not written by this script (a real cluster?); not touching it"
    fi
    mkdir -p "$CONF_DIR" "$STATE/ctld" "$LOG" /var/spool/slurmd
    local last=$((17000 + NODES))
    cat >"$CONF.tmp" <<EOF
$MARK
ClusterName=trainready-local
SlurmctldHost=$HOST
SlurmctldPort=16817
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/ctld
SlurmctldPidFile=/var/run/slurmctld-trainready.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdPidFile=/var/run/slurmd-%n.pid
SlurmdSpoolDir=/var/spool/slurmd/%n
SlurmdLogFile=$LOG/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
# Job records stay queryable (scontrol show job) for 10 min after they end; without slurmdbd there
# is no sacct database, so job-completion records also go to a text file (jobcomp/filetxt).
MinJobAge=600
JobCompType=jobcomp/filetxt
JobCompLoc=$LOG/jobcomp.log
# Tasks get slurmd's own open-files limit, not the submitting shell's (a common production setting).
PropagateResourceLimitsExcept=NOFILE
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
NodeName=node[1-$NODES] NodeHostname=$HOST NodeAddr=$HOST Port=[17001-$last] CPUs=2 RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes=node[1-$NODES] Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
    mv "$CONF.tmp" "$CONF"
}

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

start_daemons() {
    pid_alive /var/run/slurmctld-trainready.pid || detached slurmctld || cannot "slurmctld does not start (see $LOG/slurmctld.log)"
    local k
    for k in $(seq 1 "$NODES"); do
        mkdir -p "/var/spool/slurmd/node$k"
        pid_alive "/var/run/slurmd-node$k.pid" || detached slurmd -N "node$k" || cannot "slurmd -N node$k does not start (see $LOG/slurmd-node$k.log)"
    done
}

wait_idle() {
    local i tries=$((60 + NODES))  # 0.5 s each: 30 s, plus 0.5 s per node for slurmd registrations
    for i in $(seq 1 "$tries"); do
        if [ "$(sinfo -h -N -o '%N %T' 2>/dev/null | grep -cE ' (idle|mixed|allocated|drained|draining)')" -ge "$NODES" ]; then
            return 0
        fi
        sleep 0.5
    done
    cannot "nodes did not come up within $((tries / 2)) s: $(sinfo -h -N -o '%N %T' 2>&1 | tr '\n' ' ')"
}

running_nodes() {  # the slurmd pid files this script wrote (node1..nodeK), as a count
    ls /var/run/slurmd-node[0-9]*.pid 2>/dev/null | wc -l
}

up() {
    need_root
    ensure_packages
    ensure_munge
    if [ -f "$CONF" ] && grep -qF "$MARK" "$CONF" && ! grep -qF "NodeName=node[1-$NODES] " "$CONF"; then
        say "reconfiguring from $(running_nodes) to $NODES node(s)"
        down  # slurmctld keeps node records in its state: a new node count starts from a clean state
    fi
    write_conf
    start_daemons
    wait_idle
    # A node left drained by an earlier test run (trainready: reason) comes back clean.
    scontrol update nodename="node[1-$NODES]" state=resume >/dev/null 2>&1 || true
    say "up: $(sinfo -h -o '%N:%T' | tr '\n' ' ')"  # one entry per state: node[1-128]:idle
}

stop_pidfile() {
    local f=$1 pid
    [ -f "$f" ] || return 0
    pid=$(cat "$f" 2>/dev/null) || return 0  # the daemon removed it as it stopped
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid" 2>/dev/null
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null
    fi
    rm -f "$f"
}

down() {
    local f
    # every node up, whatever N was: all told to stop first, then each waited for (one by one, 64 slurmd took
    # ~2 min on a 2-core x86 VM; told at once they stop together)
    for f in /var/run/slurmd-node[0-9]*.pid; do [ -f "$f" ] && kill "$(cat "$f" 2>/dev/null)" 2>/dev/null; done
    for f in /var/run/slurmd-node[0-9]*.pid; do stop_pidfile "$f"; done
    stop_pidfile /var/run/slurmctld-trainready.pid
    rm -rf "$STATE" /var/spool/slurmd/node[0-9]* "$LOG"
    if [ -f "$CONF" ] && grep -qF "$MARK" "$CONF"; then rm -f "$CONF"; fi
    if [ -f "$CONF_DIR/cgroup.conf" ] && grep -qF "$MARK" "$CONF_DIR/cgroup.conf"; then rm -f "$CONF_DIR/cgroup.conf"; fi
    say "down"
}

status() {
    command -v sinfo >/dev/null 2>&1 || { echo "local-slurm: not installed"; return 1; }
    [ -f "$CONF" ] && grep -qF "$MARK" "$CONF" || { echo "local-slurm: not configured by this script"; return 1; }
    pid_alive /var/run/slurmctld-trainready.pid || { echo "local-slurm: slurmctld not running"; return 1; }
    sinfo -N -o '%N %T %E'
}

parse_nodes() {  # up's options: --nodes N (or --nodes=N)
    while [ $# -gt 0 ]; do
        case "$1" in
            --nodes|-N) [ $# -ge 2 ] || { echo "local-slurm: --nodes: expected a count" >&2; exit 2; }; NODES=$2; shift 2 ;;
            --nodes=*) NODES=${1#--nodes=}; shift ;;
            *) echo "local-slurm: up: unknown option '$1' (expected --nodes N)" >&2; exit 2 ;;
        esac
    done
    case "$NODES" in
        ''|*[!0-9]*) echo "local-slurm: --nodes '$NODES': expected a whole number 1..$MAX_NODES" >&2; exit 2 ;;
    esac
    if [ "$NODES" -lt 1 ] || [ "$NODES" -gt "$MAX_NODES" ]; then
        echo "local-slurm: --nodes $NODES: expected 1..$MAX_NODES" >&2; exit 2
    fi
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
    up) parse_nodes "$@"; up ;;
    down) down ;;
    status) status ;;
    *) echo "usage: $0 up [--nodes N]|down|status" >&2; exit 2 ;;
esac
