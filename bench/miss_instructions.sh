#!/usr/bin/env bash
# User-space instructions per cache miss, counted by valgrind's callgrind (repeatable whatever
# else the machine does; timings are not): one Shellac binary under callgrind, one worker
# thread, default config apart from ports, in front of bench/origin.rs; `clients unique` sends
# WARM distinct-URL GETs (not counted), then the counters are zeroed and N more are counted
# (cacheable 100-byte objects over 50 connections, as bench/miss_paired.sh's misses).
#   N=10000 bench/miss_instructions.sh BINARY [BINARY...]     # one line per binary
#   CALLGRIND_OUT=/tmp/miss bench/miss_instructions.sh A B    # keeps /tmp/miss-1.out, -2.out:
#   callgrind_annotate --inclusive=yes /tmp/miss-1.out
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source bench/lib.sh
(( $# > 0 )) || { echo "usage: bench/miss_instructions.sh BINARY [BINARY...]" >&2; exit 1; }
N=${N:-10000}
WARM=${WARM:-1000}
CLIENTS=target/release/examples/clients
need_built "$@" target/release/examples/origin "$CLIENTS"
need_tools valgrind callgrind_control curl
start_origin target/release/examples/origin
i=0
for bin in "$@"; do
  i=$((i + 1))
  out=${CALLGRIND_OUT:+$CALLGRIND_OUT-$i.out}
  out=${out:-$TMP/cg-$i.out}
  port=$(free_port); admin=$(free_port)
  printf '[server]\nlisten = ["127.0.0.1:%s"]\nadmin = "127.0.0.1:%s"\nthreads = 1\n\n[[backend]]\nhost = "127.0.0.1"\nport = %s\n' \
    "$port" "$admin" "$ORIGIN_PORT" >"$TMP/shellac-$i.toml"
  valgrind --tool=callgrind --callgrind-out-file="$TMP/cg-run-$i.%p" "$bin" serve \
    --config "$TMP/shellac-$i.toml" 2>"$TMP/valgrind-$i.err" &
  vp=$!
  PIDS+=("$vp")
  for _ in $(seq 300); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.2; done
  timeout 600 "$CLIENTS" unique "127.0.0.1:$port" "/obj/warm-" "$WARM" 50 >/dev/null
  callgrind_control -z "$vp" >/dev/null 2>&1
  timeout 600 "$CLIENTS" unique "127.0.0.1:$port" "/obj/m-" "$N" 50 >"$TMP/clients-$i.txt"
  callgrind_control -d "$vp" >/dev/null 2>&1
  errors=$(awk '$1 == "ERRORS" {print $2}' "$TMP/clients-$i.txt")
  kill -INT "$vp"; wait "$vp" 2>/dev/null || true
  # The dump after zeroing is the first numbered part (.1) of the run's output.
  cp "$TMP"/cg-run-"$i".*.1 "$out"
  ir=$(awk '/^(summary|totals):/ {print $2; exit}' "$out")
  awk -v ir="$ir" -v n="$N" -v e="$errors" -v b="$bin" \
    'BEGIN { printf "%s: %.0f instructions per miss (%d misses, %s errors)\n", b, ir / n, n, e }'
done
