#!/usr/bin/env bash
# Workload 7's second half, measured in rounds: the hit rate of workload 1 (GET /hit6k, 50
# keep-alive connections) with and without N idle keep-alive connections held open, on the
# same Shellac process (one worker thread on CPU 0; origin, wrk and the idle clients on CPU 1).
# Each round measures without, opens the idle connections (one request each, then held),
# measures with, and closes them; the change is taken within the round, then the median over
# rounds (the drift of a virtual machine between rounds cancels out).
#
#   cargo build --release --bins --examples && bench/idle_hit.sh     # N=10000 RUNS=5 SECS=5
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
N=${N:-10000}
RUNS=${RUNS:-5}
SECS=${SECS:-5}
SHELLAC=${SHELLAC:-target/release/shellac}
ORIGIN=${ORIGIN:-target/release/examples/origin}
CLIENTS=${CLIENTS:-target/release/examples/clients}
command -v wrk >/dev/null || { echo "needs wrk (apt-get install wrk)" >&2; exit 1; }
ulimit -n $(( N + 4096 )) 2>/dev/null || { echo "needs ulimit -n $(( N + 4096 ))" >&2; exit 1; }

. bench/lib.sh   # TMP, PIDS (stopped on exit), free_port, start_origin, start_shellac, cpu_ticks, median, wait_for_hit
need_built "$SHELLAC" "$ORIGIN" "$CLIENTS"

start_origin "$ORIGIN"
read -r PORT _ SP < <(start_shellac "$SHELLAC" "max_connections = $(( N + 1000 ))
idle_timeout = \"300s\"")
PIDS+=("$SP")
wait_for_hit "$PORT" hit6k

measure() { # -> "req/s µs-CPU-per-request"
  local c0 c1 out
  c0=$(cpu_ticks "$SP")
  out=$(timeout $((SECS + 30)) taskset -c 1 wrk -t1 -c50 -d"${SECS}s" "http://127.0.0.1:$PORT/hit6k")
  c1=$(cpu_ticks "$SP")
  python3 -c "
t = $(getconf CLK_TCK); n = $(awk '/requests in/ {print $1}' <<<"$out")
print($(awk '/Requests\/sec/ {print $2}' <<<"$out"), round(($c1 - $c0) * 1e6 / t / n, 2))"
}

changes=(); cpu_changes=()
timeout 30 taskset -c 1 wrk -t1 -c50 -d2s "http://127.0.0.1:$PORT/hit6k" >/dev/null
for run in $(seq "$RUNS"); do
  read -r rps0 us0 < <(measure)
  taskset -c 1 "$CLIENTS" idle "127.0.0.1:$PORT" /hit6k "$N" $(( SECS + 60 )) >"$TMP/idle.txt" 2>&1 &
  cp=$!
  for _ in $(seq 600); do grep -q IDLE_READY "$TMP/idle.txt" && break; sleep 0.1; done
  sleep "${SETTLE:-2}"   # idle_release (1 s by default) has released them
  open=$(awk '/IDLE_READY/ {print $2}' "$TMP/idle.txt")
  read -r rps1 us1 < <(measure)
  kill "$cp" 2>/dev/null; wait "$cp" 2>/dev/null || true
  read -r change cpu_change < <(python3 -c "print(round(100 * ($rps1 / $rps0 - 1), 1), round(100 * ($us1 / $us0 - 1), 1))")
  printf 'run %s: without %9.0f req/s %6s µs CPU/request | with %s idle %9.0f req/s %6s µs CPU/request | req/s %+.1f%%, CPU/request %+.1f%%\n' \
    "$run" "$rps0" "$us0" "$open" "$rps1" "$us1" "$change" "$cpu_change" >&2
  changes+=("$change"); cpu_changes+=("$cpu_change")
  sleep 1
done
echo "hit6k with $N idle connections held, ${SECS}s x $RUNS rounds: median req/s change $(median "${changes[@]}")%, CPU per request $(median "${cpu_changes[@]}")% (goal: drop <= 10%)"
