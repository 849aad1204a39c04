#!/usr/bin/env bash
# Two Shellac binaries compared in pairs: both run *at the same time* on CPU 0 (one worker
# thread each, default config apart from ports), each driven by its own wrk on CPU 1 against
# the same cached object of bench/origin.rs. Reported per run: each binary's own CPU time per
# request (user + system, all threads) and A/B = the requests B keeps at A's CPU. On a virtual
# machine whose speed drifts between runs this is the comparison to trust (both see the same
# moment); use it to decide whether a change pays.
#
#   cp target/release/shellac /tmp/shellac.before   # then rebuild with the change
#   bench/ab_paired.sh /tmp/shellac.before target/release/shellac
#   OBJECT=small100 CONNS=200 RUNS=7 B_ENV=MIMALLOC_PURGE_DELAY=-1 bench/ab_paired.sh A B
#   OBJECT=small100 CONNS=200 bench/ab_paired.sh reference target/release/shellac
#       A = the reference server (bench/reference.rs, one thread on CPU 0): A/B is then
#       Shellac's share of the reference's throughput at equal CPU (issue 8's "of reference")
#   B_IDLE=10000 bench/ab_paired.sh target/release/shellac target/release/shellac
#       workload 7 at equal CPU: B holds 10,000 idle keep-alive connections (one request each,
#       then held; released and trimmed before the measurement, SETTLE=4 s), A none; A/B is
#       then B's CPU per request with them against A's without, at the same moment
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
A=${1:?usage: bench/ab_paired.sh BINARY_A BINARY_B}
B=${2:?usage: bench/ab_paired.sh BINARY_A BINARY_B}
OBJECT=${OBJECT:-hit6k}
CONNS=${CONNS:-50}
SECS=${SECS:-6}
RUNS=${RUNS:-5}
ORIGIN=${ORIGIN:-target/release/examples/origin}
CLIENTS=${CLIENTS:-target/release/examples/clients}
B_IDLE=${B_IDLE:-0}
if (( B_IDLE > 0 )); then
  ulimit -n $(( B_IDLE + 4096 )) 2>/dev/null || { echo "needs ulimit -n $(( B_IDLE + 4096 ))" >&2; exit 1; }
fi
command -v wrk >/dev/null || { echo "needs wrk (apt-get install wrk)" >&2; exit 1; }

. bench/lib.sh   # TMP, PIDS (stopped on exit), free_port, start_origin, start_shellac, cpu_ticks, ...
REFERENCE=${REFERENCE:-target/release/examples/reference}
if [[ $A == reference ]]; then need_built "$REFERENCE" "$B" "$ORIGIN"; else need_built "$A" "$B" "$ORIGIN"; fi
(( B_IDLE == 0 )) || need_built "$CLIENTS"

# Starts A: a Shellac binary, or the reference server; prints "port pid".
start_a() {
  if [[ $A == reference ]]; then
    local port; port=$(free_port)
    taskset -c 0 "$REFERENCE" "127.0.0.1:$port" 6451 2>/dev/null &
    local pid=$!
    for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.05; done
    echo "$port $pid"
  else
    local port pid
    read -r port _ pid < <(start_shellac "$A" "" "${A_ENV:-}")
    echo "$port $pid"
  fi
}

start_origin "$ORIGIN"

ratios=()
for run in $(seq "$RUNS"); do
  read -r port_a pid_a < <(start_a)
  b_config=""
  (( B_IDLE > 0 )) && b_config="max_connections = $(( B_IDLE + 1000 ))
idle_timeout = \"300s\""
  read -r port_b admin_b pid_b < <(start_shellac "$B" "$b_config" "${B_ENV:-}")
  PIDS+=("$pid_a" "$pid_b")
  [[ $A == reference ]] || wait_for_hit "$port_a" "$OBJECT"
  wait_for_hit "$port_b" "$OBJECT"
  idle_pid=""
  if (( B_IDLE > 0 )); then
    taskset -c 1 "$CLIENTS" idle "127.0.0.1:$port_b" "/$OBJECT" "$B_IDLE" $(( SECS + 120 )) >"$TMP/idle.txt" 2>&1 &
    idle_pid=$!
    PIDS+=("$idle_pid")
    for _ in $(seq 600); do grep -q IDLE_READY "$TMP/idle.txt" && break; sleep 0.1; done
    sleep "${SETTLE:-4}"
    curl -s "http://127.0.0.1:$admin_b/stats" | python3 -c '
import json, sys
s = json.load(sys.stdin)
print("B holds %d idle connections (%d released), %d trims" % (s["n_client_conn"], s["n_client_conn_released"], s["mem_trim"]), file=sys.stderr)'
  fi
  read -r req_a us_a req_b us_b ratio < <(paired_cpu "$pid_a" "$port_a" "$pid_b" "$port_b" 1)
  if [[ -n $idle_pid ]]; then kill "$idle_pid" 2>/dev/null; wait "$idle_pid" 2>/dev/null || true; fi
  printf 'run %s: A %9s req %6s µs CPU/request | B %9s req %6s µs CPU/request | A/B %5s%%\n' \
    "$run" "$req_a" "$us_a" "$req_b" "$us_b" "$ratio" >&2
  ratios+=("$ratio")
done
median=$(median "${ratios[@]}")
echo "/$OBJECT, $CONNS connections each, ${SECS}s x $RUNS: median A/B CPU per request = $median% (above 100%: B is cheaper)"
