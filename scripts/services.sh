#!/usr/bin/env bash
# Starts (or stops) the services the `postgres` and `slurm` tests run against, on this machine:
#   - PostgreSQL: a fresh cluster in a temporary folder, listening on a unix socket only;
#   - Slurm: munged, slurmctld and NODES slurmd daemons (node1..nodeN, all on this host), with
#     no GPUs (SLURM_GRES="" here; a cluster with GPUs gets --gres=gpu:1), in two partitions:
#     debug (the default) and second, which a job reaches only when it asks for it (the test of
#     the config file's [slurm] table does).
# `scripts/services.sh start` writes the settings to $KBLASTER_SERVICES_DIR/services.env
# (default /tmp/kblaster-services), which scripts/test.sh sources before ctest:
#   KBLASTER_TEST_POSTGRES  admin URL of the PostgreSQL server
#   SLURM_CONF              the slurm.conf the daemons and the clients use
#   KBLASTER_TEST_SLURM     "1" when Slurm is up
# Needs root (as CI runs): the daemons run as the postgres and munge users.
set -euo pipefail
dir=${KBLASTER_SERVICES_DIR:-/tmp/kblaster-services}
nodes=${KBLASTER_SLURM_NODES:-4}
cpus_per_node=${KBLASTER_SLURM_CPUS:-2}
pg_port=${KBLASTER_PG_PORT:-55432}
action=${1:-start}

pg_bin() { ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1; }
as_user() { local u=$1; shift; if [[ $(id -u) == 0 ]]; then runuser -u "$u" -- "$@"; else "$@"; fi; }

stop() {
  if [[ -f $dir/pg/data/postmaster.pid ]]; then
    as_user postgres "$(pg_bin)/pg_ctl" -D "$dir/pg/data" -m immediate stop >/dev/null 2>&1 || true
  fi
  for pidfile in "$dir"/slurm/*.pid "$dir"/munge/munged.pid; do
    [[ -f $pidfile ]] && kill "$(cat "$pidfile")" 2>/dev/null || true
  done
  sleep 1
}

start_postgres() {
  local bin; bin=$(pg_bin)
  mkdir -p "$dir/pg"
  chmod 755 "$dir" "$dir/pg"
  [[ $(id -u) == 0 ]] && chown postgres: "$dir/pg"
  if [[ ! -f $dir/pg/data/PG_VERSION ]]; then
    as_user postgres "$bin/initdb" -D "$dir/pg/data" -A trust -U postgres >"$dir/pg/initdb.log"
  fi
  as_user postgres "$bin/pg_ctl" -D "$dir/pg/data" -l "$dir/pg/server.log" -w -t 60 \
    -o "-k $dir/pg -p $pg_port -c listen_addresses='' -c max_connections=200 -c fsync=on" start \
    >/dev/null
  echo "export KBLASTER_TEST_POSTGRES='postgresql://postgres@/postgres?host=$dir/pg&port=$pg_port'" \
    >>"$dir/services.env"
  psql -h "$dir/pg" -p "$pg_port" -U postgres -Atc 'SELECT version()' | head -1
}

start_slurm() {
  local s=$dir/slurm host
  host=$(hostname -s)
  mkdir -p "$s/state" "$s/spool" "$dir/munge"
  # munge: the key the package made, a socket in our folder.
  [[ -f /etc/munge/munge.key ]] || { mungekey --create 2>/dev/null || create-munge-key -f; }
  chown -R munge: "$dir/munge" 2>/dev/null || true
  as_user munge /usr/sbin/munged --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
    --seed-file="$dir/munge/munged.seed" --force
  cat >"$s/slurm.conf" <<CONF
ClusterName=kblaster
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$s/state
SlurmdSpoolDir=$s/spool/%n
SlurmctldPidFile=$s/slurmctld.pid
SlurmdPidFile=$s/slurmd-%n.pid
SlurmctldLogFile=$s/slurmctld.log
SlurmdLogFile=$s/slurmd-%n.log
SlurmctldPort=16817
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
MinJobAge=3600
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
NodeName=node[1-$nodes] NodeHostname=$host NodeAddr=127.0.0.1 CPUs=$cpus_per_node RealMemory=2000 Port=[17001-$((17000 + nodes))] State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
PartitionName=second Nodes=ALL Default=NO MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
  export SLURM_CONF=$s/slurm.conf
  /usr/sbin/slurmctld -i
  for i in $(seq 1 "$nodes"); do
    mkdir -p "$s/spool/node$i"
    /usr/sbin/slurmd -N "node$i"
  done
  for _ in $(seq 1 60); do
    if sinfo -h -o '%T' 2>/dev/null | grep -q idle; then
      break
    fi
    sleep 1
  done
  sinfo -h -o '%D nodes %T' | head -3
  sinfo -h -o '%T' | grep -q idle || { echo "services: no idle Slurm node" >&2; tail -20 "$s"/*.log >&2; exit 1; }
  echo "export SLURM_CONF='$s/slurm.conf'" >>"$dir/services.env"
  echo "export KBLASTER_TEST_SLURM=1" >>"$dir/services.env"
}

case $action in
start)
  stop
  rm -rf "$dir"
  mkdir -p "$dir"
  : >"$dir/services.env"
  start_postgres
  start_slurm
  echo "services: settings in $dir/services.env"
  ;;
stop) stop ;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
