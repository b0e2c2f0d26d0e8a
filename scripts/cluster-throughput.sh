#!/usr/bin/env bash
# A simulated cluster on one CPU machine: Slurm with several node entries (scripts/services.sh
# starts node1..node4, 2 CPUs each), W workers submitted with sbatch, each running
# `kblaster queue work` against one shared store (SQLite folder or PostgreSQL), taking probe jobs
# (`kblaster queue probe`: jobs that only wait a set time, standing in for evaluations).
# Measures jobs per minute against W, for probe jobs of 0.5 s (work-bound: throughput should grow
# with W) and of 0 s (nothing but queue traffic: where the store is the limit).
# This is a CPU measurement of the queue and the store, not of GPU evaluations.
# Usage: scripts/cluster-throughput.sh [OUT.json]   (needs: scripts/services.sh start)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-evidence/cpu/cluster-throughput.json}
kb=$(realpath "${KBLASTER:-build/release/kblaster}")
services=${KBLASTER_SERVICES_DIR:-/tmp/kblaster-services}/services.env
# shellcheck disable=SC1090
source "$services"
work=$(mktemp -d /tmp/kb-throughput.XXXXXX)
trap 'rm -rf "$work"' EXIT
results=$work/results.jsonl
: >"$results"

measure() { # backend seconds count workers
  local backend=$1 seconds=$2 count=$3 workers=$4 store name
  name="kbthr_${backend}_${workers}_${seconds/./_}_$$"
  if [[ $backend == postgres ]]; then
    psql "$KBLASTER_TEST_POSTGRES" -qc "CREATE DATABASE $name" >/dev/null
    store=$(python3 -c 'import sys,re; u=sys.argv[1]; print(re.sub(r"/postgres(\?|$)", "/"+sys.argv[2]+r"\1", u, count=1))' "$KBLASTER_TEST_POSTGRES" "$name")
    export KBLASTER_STORE_FILES=$work/$name-files
  else
    store=$work/$name
  fi
  "$kb" -q --store "$store" queue probe --count "$count" --seconds "$seconds" >/dev/null
  local ids=() start end
  start=$(date +%s.%N)
  for _ in $(seq 1 "$workers"); do
    ids+=("$(sbatch --parsable --ntasks 1 --output "$work/slurm-%j.out" \
      --wrap "exec '$kb' -q --store '$store' queue work --idle-exit 0")")
  done
  local joined; joined=$(IFS=,; echo "${ids[*]}")
  while squeue -h -j "$joined" -t PENDING,RUNNING,CONFIGURING,COMPLETING 2>/dev/null | grep -q .; do
    sleep 0.2
  done
  end=$(date +%s.%N)
  local status; status=$("$kb" -q --store "$store" queue status)
  python3 - "$backend" "$seconds" "$count" "$workers" "$start" "$end" "$status" >>"$results" <<'PY'
import json, re, sys
backend, seconds, count, workers, start, end, status = sys.argv[1:]
done = int(re.search(r"(\d+) done", status).group(1))
wall = float(end) - float(start)
print(json.dumps({"store": backend, "probe_seconds": float(seconds), "jobs": int(count),
                  "workers": int(workers), "done": done, "wall_seconds": round(wall, 3),
                  "jobs_per_minute": round(60 * done / wall, 1)}))
PY
  tail -1 "$results"
  if [[ $backend == postgres ]]; then
    psql "$KBLASTER_TEST_POSTGRES" -qc "DROP DATABASE $name WITH (FORCE)" >/dev/null
  fi
}

for backend in sqlite postgres; do
  for workers in 1 2 4 8; do
    measure "$backend" 0.5 $((12 * workers)) "$workers"
  done
  for workers in 1 2 4 8; do
    measure "$backend" 0 400 "$workers"
  done
done

mkdir -p "$(dirname "$out")"
python3 - "$results" "$out" "$(nproc)" "$(sinfo -h -o '%D' | head -1)" <<'PY'
import json, sys, datetime, platform
rows = [json.loads(l) for l in open(sys.argv[1])]
json.dump({
    "format": "kblaster-cluster-throughput", "format_version": 1,
    "kind": "CPU measurement: the queue and the store under Slurm on one machine; probe jobs "
            "stand in for evaluations (no GPU work)",
    "created": datetime.datetime.utcnow().isoformat() + "Z",
    "host_cpus": int(sys.argv[3]), "slurm_nodes": int(sys.argv[4]),
    "host": platform.node(), "runs": rows,
}, open(sys.argv[2], "w"), indent=2)
print("written", sys.argv[2])
PY
