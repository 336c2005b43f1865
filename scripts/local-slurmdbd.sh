#!/usr/bin/env bash
# Slurm accounting for a local test cluster (scripts/local-slurm.sh up --accounting): slurmdbd over Debian's
# MariaDB, both listening on 127.0.0.1 only, their data and logs under the cluster's own state and log folders.
#
#   local-slurmdbd.sh slurm-conf CONF_DIR STATE LOG CTLD_PORT   print the slurm.conf(5) lines that point
#                                                                 slurmctld at this slurmdbd
#   local-slurmdbd.sh up   CONF_DIR STATE LOG CTLD_PORT          MariaDB (its own datadir, port, socket),
#                                                                 the database user, slurmdbd.conf(5), slurmdbd,
#                                                                 the cluster registered (sacctmgr)
#   local-slurmdbd.sh down CONF_DIR STATE LOG CTLD_PORT          stop both (the data goes with STATE)
#
# Ports: slurmdbd on CTLD_PORT+100, MariaDB on CTLD_PORT+101 (the acct cluster: 16929, 16930).  slurmdbd.conf
# sits beside slurm.conf (slurmdbd reads the one in SLURM_CONF's folder), mode 0600: it holds the database
# password, generated here and never printed.  Missing packages: one "local-slurm: cannot start:" line, exit 3.
set -u
cmd=$1 CONF_DIR=$2 STATE=$3 LOG=$4 CTLD_PORT=$5
DBD_PORT=$((CTLD_PORT + 100)) DB_PORT=$((CTLD_PORT + 101))
DB=$STATE/mariadb DBD_PID=$STATE/slurmdbd.pid
MARK="# written by trainready scripts/local-slurm.sh"

cannot() { echo "local-slurm: cannot start: $*"; exit 3; }
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
sql() { mariadb --no-defaults -uroot --socket="$DB/sock" -e "$1"; }

ensure() {
    local missing=()
    command -v slurmdbd >/dev/null 2>&1 || missing+=(slurmdbd)
    command -v mariadbd >/dev/null 2>&1 || missing+=(mariadb-server)
    [ ${#missing[@]} = 0 ] && return 0
    [ "${LOCAL_SLURM_NO_INSTALL:-0}" = 1 ] && cannot "--accounting: missing ${missing[*]} and LOCAL_SLURM_NO_INSTALL=1 (installs nothing): apt-get install slurmdbd mariadb-server first"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurmdbd mariadb-server; } \
        >"${TMPDIR:-/tmp}/local-slurmdbd-apt.log" 2>&1 || cannot "--accounting: apt-get install slurmdbd mariadb-server failed"
}

mariadb_up() {
    mkdir -p "$DB" "$LOG"
    if [ ! -d "$DB/data/mysql" ]; then
        mariadb-install-db --no-defaults --datadir="$DB/data" --user=root --auth-root-authentication-method=socket \
            --skip-test-db >"$LOG/mariadb-install.log" 2>&1 || cannot "--accounting: mariadb-install-db failed (see $LOG/mariadb-install.log)"
    fi
    if ! alive "$DB/pid"; then
        (exec </dev/null >/dev/null 2>&1; setsid mariadbd --no-defaults --datadir="$DB/data" --user=root \
            --bind-address=127.0.0.1 --port="$DB_PORT" --socket="$DB/sock" --pid-file="$DB/pid" \
            --log-error="$LOG/mariadb.log" --innodb-buffer-pool-size=64M &)
        for _ in $(seq 1 120); do sql "select 1" >/dev/null 2>&1 && break; sleep 0.5; done
        sql "select 1" >/dev/null 2>&1 || cannot "--accounting: MariaDB does not start (see $LOG/mariadb.log)"
    fi
    [ -s "$DB/pass" ] || (umask 077; head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$DB/pass")
    sql "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$(cat "$DB/pass")';
         GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" || cannot "--accounting: cannot create the database user"
}

dbd_conf() {
    (umask 077; cat >"$CONF_DIR/slurmdbd.conf" <<CONF
$MARK
AuthType=auth/munge
DbdAddr=127.0.0.1
DbdHost=localhost
DbdPort=$DBD_PORT
SlurmUser=root
LogFile=$LOG/slurmdbd.log
PidFile=$DBD_PID
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$(cat "$DB/pass")
StorageLoc=slurm_acct_db
CONF
    )
}

up() {
    ensure
    mariadb_up
    dbd_conf
    if ! alive "$DBD_PID"; then
        (exec </dev/null >/dev/null 2>&1; setsid slurmdbd &)
    fi
    local cluster
    cluster=$(sed -n 's/^ClusterName=//p' "$CONF_DIR/slurm.conf")
    for _ in $(seq 1 60); do sacctmgr -n -P list cluster >/dev/null 2>&1 && break; sleep 0.5; done
    sacctmgr -n -P list cluster >/dev/null 2>&1 || cannot "--accounting: slurmdbd does not answer (see $LOG/slurmdbd.log)"
    sacctmgr -n -P list cluster format=cluster | grep -qx "$cluster" || sacctmgr -i add cluster "$cluster" >/dev/null \
        || cannot "--accounting: sacctmgr add cluster $cluster failed"
}

stop() {
    local pid
    alive "$1" || return 0
    pid=$(cat "$1")
    kill "$pid" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
}

down() {
    stop "$DBD_PID"
    stop "$DB/pid"
    if [ -f "$CONF_DIR/slurmdbd.conf" ] && grep -qF "$MARK" "$CONF_DIR/slurmdbd.conf"; then rm -f "$CONF_DIR/slurmdbd.conf"; fi
}

case "$cmd" in
    slurm-conf) printf '%s\n' "AccountingStorageType=accounting_storage/slurmdbd" "AccountingStorageHost=localhost" \
                    "AccountingStoragePort=$DBD_PORT" "JobAcctGatherType=jobacct_gather/linux" ;;
    up) up ;;
    down) down ;;
    *) echo "usage: $0 slurm-conf|up|down CONF_DIR STATE LOG CTLD_PORT" >&2; exit 2 ;;
esac
