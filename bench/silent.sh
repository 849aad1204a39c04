#!/usr/bin/env bash
# Connections that never send a byte (issue 23, defect 9): ROUNDS rounds of N connections
# that connect and stay silent until Shellac closes them at `header_read_timeout` (TIMEOUT, 15 s).
# Prints Shellac's RSS (KiB) before, with the N connections open, and after each round once
# they are closed, and the per-connection cost while they are open.
#
#   cargo build --release
#   bench/silent.sh                       # N=10000 ROUNDS=5
#   SHELLAC=path/to/other/shellac bench/silent.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
N=${N:-10000}
ROUNDS=${ROUNDS:-5}
TIMEOUT=${TIMEOUT:-15s}   # header_read_timeout: longer than opening N connections takes
SHELLAC=${SHELLAC:-target/release/shellac}
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
. bench/lib.sh
PORT=$(free_port); ADMIN=$(free_port); ORIGIN_PORT=$(free_port)
printf '[server]\nlisten = ["127.0.0.1:%s"]\nadmin = "127.0.0.1:%s"\nthreads = 1\nmax_connections = %s\nheader_read_timeout = "%s"\n\n[[backend]]\nhost = "127.0.0.1"\nport = %s\n' \
  "$PORT" "$ADMIN" $((N + 1000)) "$TIMEOUT" "$ORIGIN_PORT" > "$TMP/shellac.toml"
"$SHELLAC" serve --config "$TMP/shellac.toml" 2>"$TMP/shellac.err" &
SPID=$!
PIDS+=("$SPID")
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$ADMIN/stats" && break; sleep 0.05; done
rss() { awk '/VmRSS/ {print $2}' "/proc/$SPID/status"; }
stat() { curl -s "http://127.0.0.1:$ADMIN/stats" | python3 -c "import json,sys; print(json.load(sys.stdin).get('$1', '-'))"; }
echo "rss_before_kib $(rss)"
for round in $(seq "$ROUNDS"); do
  # Open N silent connections, report when all are accepted, hold them until closed by the
  # server (bounded: 60 s).
  timeout 90 python3 - "$PORT" "$N" >"$TMP/open.txt" <<'PY' &
import selectors, socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
sel = selectors.DefaultSelector()
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    sel.register(s, selectors.EVENT_READ)
print("OPEN", flush=True)
deadline, closed = time.time() + 60, 0
while closed < n and time.time() < deadline:
    for key, _ in sel.select(0.5):
        if not key.fileobj.recv(1):
            sel.unregister(key.fileobj)
            key.fileobj.close()
            closed += 1
print("CLOSED", closed, flush=True)
PY
  PY=$!
  for _ in $(seq 600); do grep -q OPEN "$TMP/open.txt" && break; sleep 0.1; done
  sleep 0.5
  open_rss=$(rss)
  echo "round $round: open $(stat n_client_conn) (waiting $(stat n_client_conn_waiting)) rss_open_kib $open_rss"
  wait "$PY" || true
  sleep 1
  echo "round $round: closed $(grep CLOSED "$TMP/open.txt" | cut -d' ' -f2), open now $(stat n_client_conn), header timeouts $(stat client_header_timeout), rss_after_kib $(rss)"
done
