#!/usr/bin/env bash
# A real N-node Slurm cluster on this one host (3 by default), for trainready's tests and CI.
#
#   scripts/local-slurm.sh up [--nodes N] [--cluster NAME] [--plain] [--preempt] [--cpus C] [--own-munge]
#                                           install (apt) what is missing, write the config, start munged,
#                                           slurmctld and one slurmd per node (node1..nodeN); idempotent;
#                                           a cluster up with another N, C or --plain is reconfigured to it.
#                                           --plain: the partition as a site writes one, with no OverSubscribe
#                                           (slurm.conf(5): the default, NO: a job that asks for --exclusive,
#                                           as every `cluster run` task does, has its node to itself and the
#                                           next one waits); without it: OverSubscribe=FORCE:4 (up to 4 jobs
#                                           share a node whatever they ask, so test runs go side by side).
#                                           --cpus C: CPUs per node (default 2)
#                                           --own-munge: a munged of this cluster's own (its socket under the
#                                           cluster's state, AuthInfo=socket=... in slurm.conf(5)), so a test
#                                           can restart munge without touching the other clusters
#                                           LOCAL_SLURM_NO_INSTALL=1: install nothing (the test suite's fixture
#                                           sets it: tests never change the host's packages); missing
#                                           slurm-wlm/munge is then a "cannot start" line
#                                           --pyxis[=SRC]: Pyxis + enroot too, built by scripts/local-pyxis.sh from SRC
#                                           (default ../shared/thirdparty) into $STATE/pyxis (reused), registered
#                                           in the cluster's plugstack.conf, enroot's paths private to it
#                                           --preempt: preemption as a site sets it for low-priority sweeps
#                                           (slurm.conf(5) PreemptType=preempt/partition_prio, PreemptMode=CANCEL):
#                                           beside `debug`, a partition `sweep` (PriorityTier=1) and `batch`
#                                           (PriorityTier=10) over the same nodes, none oversubscribed (--plain):
#                                           a batch job that needs a node cancels the sweep's task on it
#                                           and one license trainready_sweep (Licenses=: sweep --licenses)
#                                           --topology K: Slurm's tree topology (slurm.conf(5)
#                                           TopologyPlugin=topology/tree) with topology.conf(5) beside slurm.conf:
#                                           leaf switches s1, s2, ... of K nodes each under one spine `top`
#                                           (`scontrol show topology` reads it; `cluster run/sweep/pairs` name a
#                                           switch most of whose nodes fail for a cross-node cause)
#                                           --accounting: slurmdbd with Debian's MariaDB (scripts/local-slurmdbd.sh),
#                                           both on 127.0.0.1 only, AccountingStorageType=accounting_storage/slurmdbd
#   scripts/local-slurm.sh down [--cluster NAME]    stop the daemons this script started, remove its state and logs
#   scripts/local-slurm.sh status [--cluster NAME]  exit 0 when sinfo shows the nodes up, else 1 (with the reason)
#
# --cluster NAME (lowercase letters; default "local"): a second, independent cluster beside the default one,
# with its own slurmctld, config (/etc/slurm-NAME/slurm.conf), state, ports and nodes named NAME1..NAMEN.
# Slurm's commands reach it with SLURM_CONF=/etc/slurm-NAME/slurm.conf in their environment (slurm.conf(5):
# every Slurm command and daemon reads the file SLURM_CONF names); jobs carry it to their steps (sbatch's
# default --export=ALL).  The test suite runs its 64-node faults test on one while the 3-node tests use the other.
#
# Largest N measured on a 2-core x86 VM with 24 GiB: see docs/measurements.md ("The fleet at scale"); each idle
# slurmd holds a few MiB, so memory is not what bounds N: the tasks' own processes are.
#
# All "nodes" are this host (NodeHostname=$(hostname -s), one slurmd each on ports 17001-(17000+N) for the
# default cluster),
# so a node's identity inside a job is $SLURMD_NODENAME, never the hostname.  The facts used here
# (Debian's slurm-wlm 22.05 + munge, multiple slurmd per host with `slurmd -N`) are from the Slurm
# docs (slurm.conf(5), "Multiple slurmd support") and were checked on a Debian 12 host.
#
# When it cannot start (not root, no apt-get, installs forbidden, a foreign slurm.conf) it prints ONE line starting with
# "local-slurm: cannot start:" and exits 3, so the tests skip with that reason.
set -u

NODES=${LOCAL_SLURM_NODES:-3}
CPUS= CPUS_SET=0  # --cpus C (default 2)
PLAIN=0  # --plain: 1 = no OverSubscribe in the partition
TOPOLOGY=0  # --topology K: leaf switches of K nodes each (0: no topology plugin)
ACCOUNTING=0  # --accounting: 1 = slurmdbd + MariaDB on 127.0.0.1 (scripts/local-slurmdbd.sh)
DBD_SCRIPT="$(dirname "$0")/local-slurmdbd.sh"
PREEMPT=0  # --preempt: 1 = preemption by partition priority, a low "sweep" and a high "batch" partition
OWN_MUNGE=0  # --own-munge: 1 = this cluster's own munged
PYXIS= PYXIS_SCRIPT="$(dirname "$0")/local-pyxis.sh"  # --pyxis[=SRC]: the sources' folder
# --cpus at most this host's CPUs: every slurmd here reports the host's, and a node that registers with fewer
# CPUs than slurm.conf gives it is set DRAIN (slurm.conf(5), SlurmdParameters=config_overrides)
MAX_CPUS=$(nproc 2>/dev/null || echo 1)
MAX_NODES=999  # slurmd ports BASE+1..BASE+999 (17001.. for the default cluster); far above what one small host holds
MARK="# written by trainready scripts/local-slurm.sh"
HOST=$(hostname -s)

instance() {  # every name and port of cluster $1 ("local": the default cluster, as it always was)
    NAME=$1
    if [ "$NAME" = local ]; then
        CONF_DIR=/etc/slurm CLUSTER=trainready-local PREFIX=node CTLD_PORT=16817 BASE=17000
        STATE=/var/lib/trainready-local-slurm LOG=/var/log/trainready-local-slurm
        CTLD_PID=/var/run/slurmctld-trainready.pid
    else
        # k = 1..6: slurmctld on 16818..16823, slurmd on 10001..15999 (9 and 10: 16826-16827, 18001..19999): below Linux's default
        # ephemeral ports (32768.., where a client socket could hold one first) and outside 20000..29999, where
        # `cluster run` picks its all_reduce rendezvous port (cluster/steps.py)
        # The test suite's clusters run side by side, so each has a slot of its own; another name takes one from
        # its checksum (two such names may share a slot: never run those two at once).  k=7 and 8 are skipped:
        # their slurmd ports would reach the slurmctld ports (16817..) and the default cluster's (17001..).
        local k
        case $NAME in
            outage) k=1 ;; site) k=2 ;; scale) k=3 ;; alt) k=4 ;; img) k=5 ;; hostset) k=6 ;;
            pyxis) k=9 ;;   # slurmctld 16826, slurmd 18001..18999
            sweep) k=10 ;;  # slurmctld 16827, slurmd 19001..19999
            topo) k=11 ;;   # slurmctld 16828, slurmd 8001..8999 (below: its own range)
            acct) k=12 ;;   # slurmctld 16829, slurmd 7001..7999; with --accounting slurmdbd 16929, MariaDB 16930
            big) k=13 ;;    # slurmctld 16830, slurmd 6001..6999: benchmarks/cluster_scale.py --cluster big
            acc) k=14 ;;    # slurmctld 16831, slurmd 5001..5999: benchmarks/accuracy.py --cluster acc
            accuracy) k=15 ;;  # slurmctld 16832, slurmd 4001..4999: tests/test_accuracy_campaign.py
            rails) k=16 ;;  # slurmctld 16833, slurmd 3001..3999: tests/test_cluster_fabric_pairs.py
            *) k=$(( $(printf %s "$NAME" | cksum | cut -d' ' -f1) % 6 + 1 )) ;;
        esac
        CONF_DIR=/etc/slurm-$NAME CLUSTER=trainready-$NAME PREFIX=$NAME CTLD_PORT=$((16817 + k)) BASE=$((9000 + 1000 * k))
        [ "$k" -ge 11 ] && BASE=$((8000 - 1000 * (k - 11)))  # 20000.. is cluster run's rendezvous range
        STATE=/var/lib/trainready-$NAME-slurm LOG=/var/log/trainready-$NAME-slurm
        CTLD_PID=/var/run/slurmctld-trainready-$NAME.pid
    fi
    CONF=$CONF_DIR/slurm.conf
    MUNGE_DIR=$STATE/munge  # --own-munge: its socket, pid and seed
    export SLURM_CONF=$CONF  # this script's own sinfo/scontrol, and the daemons it starts
}
instance local

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

ensure_munge_once() {  # two clusters brought up at once (two test workers) start one munged, not two
    mkdir -p /run/lock
    ( flock 9; ensure_munge ) 9>/run/lock/trainready-local-slurm-munge.lock || exit $?
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

write_conf() {  # the config for these options, as $CONF.tmp (up() compares it with $CONF, then moves it there)
    if [ -f "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
        cannot "$CONF exists and was not written by this script (a real cluster?); not touching it"
    fi
    mkdir -p "$CONF_DIR"
    local last=$((BASE + NODES)) share=" OverSubscribe=FORCE:4" auth=""
    [ "$PLAIN" = 1 ] && share=""
    local preempt="" tiers=""
    if [ "$PREEMPT" = 1 ]; then
        share=""
        preempt="PreemptType=preempt/partition_prio
PreemptMode=CANCEL
Licenses=trainready_sweep:1"
        tiers="PartitionName=sweep Nodes=$PREFIX[1-$NODES] MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=CANCEL
PartitionName=batch Nodes=$PREFIX[1-$NODES] MaxTime=INFINITE State=UP PriorityTier=10"
    fi
    # Past 128 nodes every slurmd of the cluster shares this host's cores: a step over all of them (N task
    # processes starting at once; 640 on 2 cores: load average ~1,200 for ~6 min) left slurmd unable to answer
    # slurmctld's pings within 60 s and its own messages within 10 s, and slurmctld set hundreds of healthy
    # nodes DOWN and the step NODE_FAIL; the step's processes did not end within 60 s of their kill and
    # slurmstepd drained 100 nodes "Kill task failed".  Slurm's timeouts (slurm.conf(5)) are raised for such a
    # host (a real fleet has one host per node); SlurmdTimeout stays 60 s below it, as the tests expect.
    local many=""
    SLURMD_TIMEOUT=60
    if [ "$NODES" -gt 128 ]; then
        SLURMD_TIMEOUT=900
        many="
MessageTimeout=60
UnkillableStepTimeout=600"
    fi
    # AuthInfo (slurm.conf(5)): the cluster's own munged; past 128 nodes a step credential lives 600 s, not
    # 120: at 640 the cross-node step's launch reached its last slurmd after 120 s ("Task launch ... failed on
    # node big612: Job credential expired") and srun aborted the whole step
    local info=()
    [ "$OWN_MUNGE" = 1 ] && info+=("socket=$MUNGE_DIR/munge.socket")
    [ "$NODES" -gt 128 ] && info+=("cred_expire=600")
    [ "${#info[@]}" -gt 0 ] && auth="
AuthInfo=$(IFS=,; echo "${info[*]}")"
    [ -n "$PYXIS" ] && auth="$auth
PlugStackConfig=$CONF_DIR/plugstack.conf"
    [ "$TOPOLOGY" -gt 0 ] && auth="$auth
TopologyPlugin=topology/tree"
    [ "$ACCOUNTING" = 1 ] && auth="$auth
$(bash "$DBD_SCRIPT" slurm-conf "$CONF_DIR" "$STATE" "$LOG" "$CTLD_PORT")"
    cat >"$CONF.tmp" <<EOF
$MARK
ClusterName=$CLUSTER
SlurmctldHost=$HOST
SlurmctldPort=$CTLD_PORT
SlurmUser=root
AuthType=auth/munge$auth
StateSaveLocation=$STATE/ctld
SlurmctldPidFile=$CTLD_PID
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
SlurmdTimeout=$SLURMD_TIMEOUT$many
InactiveLimit=0
KillWait=5
$preempt
NodeName=$PREFIX[1-$NODES] NodeHostname=$HOST NodeAddr=$HOST Port=[$((BASE + 1))-$last] CPUs=$CPUS RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes=$PREFIX[1-$NODES] Default=YES MaxTime=INFINITE State=UP$share
$tiers
EOF
    write_topology
}

write_topology() {  # --topology K: topology.conf(5) beside slurm.conf, leaf switches of K nodes under one spine
    rm -f "$CONF_DIR/topology.conf.tmp"
    [ "$TOPOLOGY" -gt 0 ] || return 0
    local s=0 lo hi
    { echo "$MARK"
      for ((lo = 1; lo <= NODES; lo += TOPOLOGY)); do
          s=$((s + 1)) hi=$((lo + TOPOLOGY - 1))
          [ "$hi" -gt "$NODES" ] && hi=$NODES
          echo "SwitchName=s$s Nodes=$PREFIX[$lo-$hi]"
      done
      echo "SwitchName=top Switches=s[1-$s]"; } >"$CONF_DIR/topology.conf.tmp"
    # the tree is part of the config: another K reconfigures as another N does
    echo "# topology: $(cksum <"$CONF_DIR/topology.conf.tmp")" >>"$CONF.tmp"
}

own_munge() {  # this cluster's munged (same key as the host's), its socket in $MUNGE_DIR
    mkdir -p "$MUNGE_DIR"
    pid_alive "$MUNGE_DIR/munged.pid" && return 0
    # munged(8)'s 2 threads past 128 nodes: its socket's backlog filled ("Failed to connect ... Resource
    # temporarily unavailable; If munged is up, restart with --num-threads=10", thousands of times at 640)
    detached munged --force --num-threads=$(( NODES > 128 ? 32 : 2 )) --socket="$MUNGE_DIR/munge.socket" --pid-file="$MUNGE_DIR/munged.pid" \
        --log-file="$LOG/munged.log" --seed-file="$MUNGE_DIR/munged.seed" || cannot "munged for $NAME does not start (see $LOG/munged.log)"
}

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

listening() {  # the TCP ports something on this host listens on (/proc/net/tcp and tcp6: state 0A, LISTEN)
    local _ addr _ state _
    cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | while read -r _ addr _ state _; do
        [ "$state" = 0A ] && echo $((16#${addr##*:}))
    done | sort -u
}

ports_free() {  # before a daemon of this cluster starts: its port must not be another's (a cluster whose name
    # shares this one's slot, or any other program); the daemons already running here keep theirs
    local held k
    held=" $(listening | tr '\n' ' ') "
    if ! pid_alive "$CTLD_PID" && [[ "$held" == *" $CTLD_PORT "* ]]; then
        cannot "port $CTLD_PORT (this cluster's slurmctld) is in use by another program: another local cluster in the same slot? (ss -ltnp sport = :$CTLD_PORT)"
    fi
    for k in $(seq 1 "$NODES"); do
        pid_alive "/var/run/slurmd-$PREFIX$k.pid" && continue
        [[ "$held" == *" $((BASE + k)) "* ]] \
            && cannot "port $((BASE + k)) (slurmd of $PREFIX$k) is in use by another program: another local cluster in the same slot? (ss -ltnp sport = :$((BASE + k)))"
    done
    return 0
}

start_daemons() {
    pid_alive "$CTLD_PID" || detached slurmctld -f "$CONF" || cannot "slurmctld does not start (see $LOG/slurmctld.log)"
    local k
    for k in $(seq 1 "$NODES"); do
        mkdir -p "/var/spool/slurmd/$PREFIX$k"
        # --pyxis: pyxis runs the enroot on slurmd's PATH (../shared/thirdparty/README.md)
        pid_alive "/var/run/slurmd-$PREFIX$k.pid" || PATH=${PYXIS:+$STATE/pyxis/bin:}$PATH detached slurmd -f "$CONF" -N "$PREFIX$k" \
            || cannot "slurmd -N $PREFIX$k does not start (see $LOG/slurmd-$PREFIX$k.log)"
        # past 128 nodes, 64 at a time: slurmctld serves at most 256 RPCs at once (Slurm's MAX_SERVER_THREADS),
        # and hundreds of slurmd registering together left most of them "not responding" on a 2-core host
        if [ "$NODES" -gt 128 ] && [ $((k % 64)) = 0 ]; then registered "$k"; fi
    done
}

registered() {  # wait (at most 60 s) until $1 nodes have registered with slurmctld
    local _
    for _ in $(seq 1 120); do
        [ "$(sinfo -h -N -o '%T' 2>/dev/null | grep -cvE '\*|unknown|^down')" -ge "$1" ] && return 0
        sleep 0.5
    done
    say "$1 slurmd started, $(sinfo -h -N -o '%T' 2>/dev/null | grep -cvE '\*|unknown|^down') registered after 60 s; going on"
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
    ls /var/run/slurmd-"$PREFIX"[0-9]*.pid 2>/dev/null | wc -l
}

up() {
    need_root
    ensure_packages
    ports_free  # before anything is written or started
    ensure_munge_once
    write_conf
    if [ -f "$CONF" ] && ! cmp -s "$CONF" "$CONF.tmp"; then
        say "reconfiguring from $(running_nodes) to $NODES node(s), $CPUS CPUs each$([ "$PLAIN" = 1 ] && echo ', --plain')$([ "$PREEMPT" = 1 ] && echo ', --preempt')"
        down  # slurmctld keeps node records in its state: another node count, CPU count or partition starts clean
    fi
    mv "$CONF.tmp" "$CONF"
    if [ -f "$CONF_DIR/topology.conf.tmp" ]; then mv "$CONF_DIR/topology.conf.tmp" "$CONF_DIR/topology.conf"; fi
    if [ "$ACCOUNTING" = 1 ]; then bash "$DBD_SCRIPT" up "$CONF_DIR" "$STATE" "$LOG" "$CTLD_PORT" || exit 3; fi
    mkdir -p "$STATE/ctld" "$LOG" /var/spool/slurmd
    [ "$OWN_MUNGE" = 1 ] && own_munge
    if [ -n "$PYXIS" ]; then
        bash "$PYXIS_SCRIPT" build "$PYXIS" "$STATE/pyxis" && bash "$PYXIS_SCRIPT" register "$CONF_DIR" "$STATE/pyxis" || exit 3
    fi
    start_daemons
    wait_idle
    # A node left drained by an earlier test run (trainready: reason) comes back clean.
    scontrol update nodename="$PREFIX[1-$NODES]" state=resume >/dev/null 2>&1 || true
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

cluster_pids() {  # pids of this cluster's slurmd (`slurmd -f $CONF ...`), of the slurmstepd they started
    # (which inherit slurmd's environment, SLURM_CONF=$CONF) and of the jobs' processes (Slurm gives each
    # SLURM_CLUSTER_NAME=$CLUSTER and SLURMD_NODENAME): found by /proc, not by pid file, so a slurmd whose pid
    # file is gone or was never written, and a step or a job process its slurmd left behind, are found too.
    # Never this script or a process it runs under (a `down` called from inside a job of the cluster).
    local d pid cmd stat mine=" " p=$$
    [ ! -f "$CONF" ] || grep -qF "$MARK" "$CONF" || return 0  # another's slurm.conf: its daemons are not ours
    while [ "${p:-0}" -gt 1 ]; do  # proc(5): "pid (comm) state ppid ...", comm may hold spaces and parentheses
        mine="$mine$p "
        stat=$(cat "/proc/$p/stat" 2>/dev/null) || break
        stat=${stat##*) } p=${stat#* } p=${p%% *}
    done
    for d in /proc/[0-9]*; do
        pid=${d#/proc/}
        case "$mine" in *" $pid "*) continue ;; esac
        cmd=$(tr '\0' ' ' 2>/dev/null <"$d/cmdline") || continue
        case "$cmd" in
            "slurmd -f $CONF "*) echo "$pid" ;;
            slurmstepd*) tr '\0' '\n' 2>/dev/null <"$d/environ" | grep -qxF "SLURM_CONF=$CONF" && echo "$pid" ;;
            *) tr '\0' '\n' 2>/dev/null <"$d/environ" | grep -xE "SLURM_CLUSTER_NAME=$CLUSTER|SLURMD_NODENAME=$PREFIX[0-9]+" \
                   | wc -l | grep -qx 2 && echo "$pid" ;;
        esac
    done
}

stop_nodes() {  # every slurmd of this cluster and its step daemons: TERM to all at once, then waited for
    # together (at most 30 s: one by one, 640 slurmd on a 2-core x86 VM outlasted the wait and some were
    # left running), then KILL to what is left
    local pids _
    pids=$(cluster_pids)
    [ -n "$pids" ] || return 0
    kill $pids 2>/dev/null
    for _ in $(seq 1 60); do
        pids=$(for p in $pids; do kill -0 "$p" 2>/dev/null && echo "$p"; done)
        [ -n "$pids" ] || break
        sleep 0.5
    done
    [ -z "$pids" ] || kill -9 $pids 2>/dev/null
    rm -f /var/run/slurmd-"$PREFIX"[0-9]*.pid
}

down() {
    stop_nodes
    stop_pidfile "$CTLD_PID"
    stop_pidfile "$MUNGE_DIR/munged.pid"
    bash "$PYXIS_SCRIPT" unregister "$CONF_DIR"
    bash "$DBD_SCRIPT" down "$CONF_DIR" "$STATE" "$LOG" "$CTLD_PORT"
    if [ -f "$CONF_DIR/topology.conf" ] && grep -qF "$MARK" "$CONF_DIR/topology.conf"; then rm -f "$CONF_DIR/topology.conf"; fi
    rm -rf "$STATE" /var/spool/slurmd/"$PREFIX"[0-9]* "$LOG"
    if [ -f "$CONF" ] && grep -qF "$MARK" "$CONF"; then rm -f "$CONF"; fi
    if [ -f "$CONF_DIR/cgroup.conf" ] && grep -qF "$MARK" "$CONF_DIR/cgroup.conf"; then rm -f "$CONF_DIR/cgroup.conf"; fi
    say "down"
}

status() {
    command -v sinfo >/dev/null 2>&1 || { echo "local-slurm: not installed"; return 1; }
    [ -f "$CONF" ] && grep -qF "$MARK" "$CONF" || { echo "local-slurm: not configured by this script"; return 1; }
    pid_alive "$CTLD_PID" || { echo "local-slurm: slurmctld not running"; return 1; }
    sinfo -N -o '%N %T %E'
}

up_only() {  # $1: the command, $2: the option; exit 2 unless the command is up
    [ "$1" = up ] || { echo "local-slurm: $1: $2 is an option of up" >&2; exit 2; }
}

parse_opts() {  # $1: the command; then --nodes N, --cpus C, --plain (up only) and --cluster NAME; --opt=VALUE too
    local cmd=$1 name=local
    shift
    while [ $# -gt 0 ]; do
        case "$1" in
            --nodes|-N) [ "$cmd" = up ] && [ $# -ge 2 ] || { echo "local-slurm: $cmd: --nodes N is an option of up" >&2; exit 2; }; NODES=$2; shift 2 ;;
            --nodes=*) [ "$cmd" = up ] || { echo "local-slurm: $cmd: --nodes N is an option of up" >&2; exit 2; }; NODES=${1#--nodes=}; shift ;;
            --cluster) [ $# -ge 2 ] || { echo "local-slurm: --cluster: expected a name" >&2; exit 2; }; name=$2; shift 2 ;;
            --cluster=*) name=${1#--cluster=}; shift ;;
            --plain) up_only "$cmd" --plain; PLAIN=1; shift ;;
            --preempt) up_only "$cmd" --preempt; PREEMPT=1; shift ;;
            --topology) up_only "$cmd" "--topology K"; [ $# -ge 2 ] || { echo "local-slurm: --topology: expected K, nodes per leaf switch" >&2; exit 2; }; TOPOLOGY=$2; shift 2 ;;
            --topology=*) up_only "$cmd" "--topology K"; TOPOLOGY=${1#--topology=}; shift ;;
            --accounting) up_only "$cmd" --accounting; ACCOUNTING=1; shift ;;
            --own-munge) up_only "$cmd" --own-munge; OWN_MUNGE=1; shift ;;
            --pyxis|--pyxis=*) up_only "$cmd" --pyxis; PYXIS=${1#--pyxis=}; [ "$PYXIS" = --pyxis ] && PYXIS=$(dirname "$0")/../../shared/thirdparty; shift ;;
            --cpus) up_only "$cmd" "--cpus C"; [ $# -ge 2 ] || { echo "local-slurm: --cpus: expected a number" >&2; exit 2; }; CPUS=$2 CPUS_SET=1; shift 2 ;;
            --cpus=*) up_only "$cmd" "--cpus C"; CPUS=${1#--cpus=} CPUS_SET=1; shift ;;
            *) echo "local-slurm: $cmd: unknown option '$1' (expected --nodes N, --cluster NAME, --plain, --preempt, --cpus C, --own-munge, --pyxis[=SRC], --topology K, --accounting)" >&2; exit 2 ;;
        esac
    done
    if [ "$CPUS_SET" = 1 ]; then
        case "$CPUS" in
            ''|*[!0-9]*|0) echo "local-slurm: --cpus '$CPUS': expected a whole number 1..$MAX_CPUS" >&2; exit 2 ;;
        esac
        [ "$CPUS" -le "$MAX_CPUS" ] || { echo "local-slurm: --cpus $CPUS: expected 1..$MAX_CPUS (this host's CPUs)" >&2; exit 2; }
    fi
    CPUS=${CPUS:-2}
    case "$TOPOLOGY" in
        ''|*[!0-9]*) echo "local-slurm: --topology '$TOPOLOGY': expected K, a whole number of nodes per leaf switch" >&2; exit 2 ;;
    esac
    case "$name" in
        ''|*[!a-z]*|node) echo "local-slurm: --cluster '$name': expected lowercase letters (not 'node': the default cluster's node names)" >&2; exit 2 ;;
    esac
    case "$NODES" in
        ''|*[!0-9]*) echo "local-slurm: --nodes '$NODES': expected a whole number 1..$MAX_NODES" >&2; exit 2 ;;
    esac
    if [ "$NODES" -lt 1 ] || [ "$NODES" -gt "$MAX_NODES" ]; then
        echo "local-slurm: --nodes $NODES: expected 1..$MAX_NODES" >&2; exit 2
    fi
    instance "$name"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
    up|down|status) parse_opts "$cmd" "$@"; "$cmd" ;;
    *) echo "usage: $0 up [--nodes N] [--cluster NAME] [--plain] [--preempt] [--cpus C] [--own-munge] [--pyxis[=SRC]] [--topology K] [--accounting] | down [--cluster NAME] | status [--cluster NAME]" >&2; exit 2 ;;
esac
