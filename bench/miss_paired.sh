#!/usr/bin/env bash
# Workload 4 (miss storm) for two Shellac binaries at equal CPU: both run at the same time on
# CPU 0 (one worker thread each, default config apart from ports), each filled by its own
# `clients unique` on CPU 1 with N distinct cacheable 100-byte keys (50 connections), from the
# same origin. Per run: each binary's CPU time per miss (user + system, all threads), and
# B/A = B's CPU per miss against A's at the same moment (below 100% = B is cheaper).
#   cp target/release/shellac /tmp/shellac.before   # then rebuild with the change
#   N=100000 RUNS=3 bench/miss_paired.sh /tmp/shellac.before target/release/shellac
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source bench/lib.sh
A=${1:?usage: bench/miss_paired.sh BINARY_A BINARY_B}
B=${2:?usage: bench/miss_paired.sh BINARY_A BINARY_B}
N=${N:-100000}
RUNS=${RUNS:-3}
CLIENTS=target/release/examples/clients
need_built "$A" "$B" target/release/examples/origin "$CLIENTS"
start_origin target/release/examples/origin
read -r PORT_A _ PID_A < <(start_shellac "$A" "")
read -r PORT_B _ PID_B < <(start_shellac "$B" "")
PIDS+=("$PID_A" "$PID_B")
for port in "$PORT_A" "$PORT_B"; do
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.05; done
done
ratios=()
for run in $(seq "$RUNS"); do
  a0=$(cpu_ticks "$PID_A"); b0=$(cpu_ticks "$PID_B")
  timeout 300 taskset -c 1 "$CLIENTS" unique "127.0.0.1:$PORT_A" "/obj/m$run-" "$N" 50 >"$TMP/a.txt" 2>&1 &
  first=$!
  timeout 300 taskset -c 1 "$CLIENTS" unique "127.0.0.1:$PORT_B" "/obj/m$run-" "$N" 50 >"$TMP/b.txt" 2>&1
  wait "$first"
  a1=$(cpu_ticks "$PID_A"); b1=$(cpu_ticks "$PID_B")
  tick=$(getconf CLK_TCK)
  line=$(awk -v a="$((a1 - a0))" -v b="$((b1 - b0))" -v n="$N" -v t="$tick" \
    -v ea="$(awk '$1 == "ERRORS" {print $2}' "$TMP/a.txt")" -v eb="$(awk '$1 == "ERRORS" {print $2}' "$TMP/b.txt")" \
    'BEGIN { ua = a / t * 1e6 / n; ub = b / t * 1e6 / n; printf "%.2f %.2f %.1f %s %s", ua, ub, 100 * ub / ua, ea, eb }')
  read -r ua ub ratio ea eb <<<"$line"
  echo "run $run: A ${ua} µs CPU/miss, B ${ub} µs CPU/miss, B/A ${ratio}% (errors ${ea}/${eb})"
  ratios+=("$ratio")
done
echo "median B/A $(median "${ratios[@]}")% of A's CPU per miss ($N misses x $RUNS runs)"
