#!/usr/bin/env bash
# Memory per idle keep-alive connection (workload 7) for one `server.idle_release` setting:
# N connections each make one GET /hit6k and are then held idle (bench/clients.rs idle);
# Shellac's RSS growth per connection 1, 3 and 6 s after the last one opened, and again after
# glibc's malloc_trim(0) (called through gdb when gdb is installed: what a released
# connection really holds, once the allocator gives freed memory back).
#
#   cargo build --release --bins --examples
#   bench/idle_release.sh                 # REL=1s N=10000
#   REL=0s bench/idle_release.sh          # never released (the behaviour before)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
N=${N:-10000}
REL=${REL:-1s}
SHELLAC=${SHELLAC:-target/release/shellac}
ORIGIN=${ORIGIN:-target/release/examples/origin}
CLIENTS=${CLIENTS:-target/release/examples/clients}
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
. bench/lib.sh   # TMP, PIDS (stopped on exit), free_port
need_built "$SHELLAC" "$ORIGIN" "$CLIENTS"
ORIGIN_PORT=$(free_port); PORT=$(free_port); ADMIN=$(free_port)
taskset -c 1 "$ORIGIN" "127.0.0.1:$ORIGIN_PORT" >/dev/null 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$ORIGIN_PORT/hit6k" && break; sleep 0.05; done
printf '[server]\nlisten = ["127.0.0.1:%s"]\nadmin = "127.0.0.1:%s"\nthreads = 1\nmax_connections = %s\nidle_release = "%s"\n\n[[backend]]\nhost = "127.0.0.1"\nport = %s\n' \
  "$PORT" "$ADMIN" $((N + 1000)) "$REL" "$ORIGIN_PORT" > "$TMP/shellac.toml"
taskset -c 0 "$SHELLAC" serve --config "$TMP/shellac.toml" 2>"$TMP/shellac.err" &
SPID=$!
PIDS+=("$SPID")
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$PORT/hit6k" && break; sleep 0.05; done
timeout 30 taskset -c 1 wrk -t1 -c50 -d2s "http://127.0.0.1:$PORT/hit6k" >/dev/null
rss() { awk '/VmRSS/ {print $2}' "/proc/$SPID/status"; }
per_conn() { python3 -c "print(round(($(rss) - $1) / $N, 2))"; }
rss0=$(rss)
timeout 300 taskset -c 1 "$CLIENTS" idle "127.0.0.1:$PORT" /hit6k "$N" 60 >"$TMP/idle.txt" 2>&1 &
PIDS+=($!)
t0=$(date +%s.%N)
for _ in $(seq 1200); do grep -q IDLE_READY "$TMP/idle.txt" && break; sleep 0.1; done
t1=$(date +%s.%N)
grep -q IDLE_READY "$TMP/idle.txt" || { echo "clients idle failed:" >&2; cat "$TMP/idle.txt" >&2; exit 1; }
echo "idle_release=$REL: $(grep IDLE_READY "$TMP/idle.txt") opened in $(python3 -c "print(round($t1 - $t0, 1))") s"
for at in 1 3 6; do   # seconds after the last connection opened
  sleep $(( at - ${prev:-0} )); prev=$at
  echo "  +$at s: $(per_conn "$rss0") KiB per idle connection"
done
if command -v gdb >/dev/null; then
  gdb -p "$SPID" -batch -ex 'call (int)malloc_trim(0)' >/dev/null 2>&1 || true
  echo "  after malloc_trim(0): $(per_conn "$rss0") KiB per idle connection"
fi
curl -s "http://127.0.0.1:$ADMIN/stats" | python3 -c '
import json, sys
s = json.load(sys.stdin)
print("  client_idle_released=%d mem_trim=%d mem_trim_usec=%d" % (s["client_idle_released"], s["mem_trim"], s["mem_trim_usec"]))'

