#!/usr/bin/env bash
# What a released connection costs when its next request comes: user-space instructions per
# request (callgrind, repeatable) for requests that each follow a 250 ms pause on 10 keep-alive
# connections (40 requests each), with `server.idle_release` = REL. Compare REL=1s (the pause
# is shorter: sessions kept) with REL=100ms (every request starts a new session).
#
#   cargo build --release --bins --examples
#   REL=1s bench/idle_release_cost.sh; REL=100ms bench/idle_release_cost.sh
#   CALLGRIND_OUT=/tmp/cg.out REL=100ms bench/idle_release_cost.sh   # keep the loaded run's profile
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
REL=${REL:-1s}
SHELLAC=${SHELLAC:-target/release/shellac}
ORIGIN=${ORIGIN:-target/release/examples/origin}
for tool in valgrind callgrind_annotate curl python3; do
  command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install -y valgrind curl)" >&2; exit 1; }
done
. bench/lib.sh   # TMP, PIDS (stopped on exit), free_port
ORIGIN_PORT=$(free_port); PORT=$(free_port); ADMIN=$(free_port)
"$ORIGIN" "127.0.0.1:$ORIGIN_PORT" >/dev/null 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$ORIGIN_PORT/hit6k" && break; sleep 0.05; done
printf '[server]\nlisten = ["127.0.0.1:%s"]\nadmin = "127.0.0.1:%s"\nthreads = 1\nidle_release = "%s"\n\n[[backend]]\nhost = "127.0.0.1"\nport = %s\n' \
  "$PORT" "$ADMIN" "$REL" "$ORIGIN_PORT" > "$TMP/shellac.toml"
cat > "$TMP/pause.py" <<'PY'
import socket, sys, threading, time
port, n, pause, conns = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
REQ = b"GET /hit6k HTTP/1.1\r\nHost: a\r\n\r\n"
def client():
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for _ in range(n):
        s.sendall(REQ)
        buf = b""
        while True:
            buf += s.recv(65536)
            end = buf.find(b"\r\n\r\n")
            if end >= 0:
                fields = buf[:end].split(b"\r\n")
                length = int(next(f.split(b":")[1] for f in fields if f.lower().startswith(b"content-length")))
                if len(buf) >= end + 4 + length:
                    break
        time.sleep(pause)
    s.close()
threads = [threading.Thread(target=client) for _ in range(conns)]
for t in threads: t.start()
for t in threads: t.join()
PY
run() { # requests-per-connection -> total instructions
  valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.out" "$SHELLAC" serve --config "$TMP/shellac.toml" 2>/dev/null &
  local vp=$!
  PIDS+=("$vp")
  for _ in $(seq 150); do curl -s -o /dev/null "http://127.0.0.1:$PORT/hit6k" && break; sleep 0.2; done
  if (( $1 > 0 )); then timeout 120 python3 "$TMP/pause.py" "$PORT" "$1" 0.25 10; fi
  kill -INT "$vp"; wait "$vp" 2>/dev/null || true
  [[ -n ${CALLGRIND_OUT:-} && $1 -gt 0 ]] && cp "$TMP/cg.out" "$CALLGRIND_OUT"
  callgrind_annotate "$TMP/cg.out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
}
base=$(run 0)
loaded=$(run 40)
echo "idle_release=$REL: $(( (loaded - base) / 400 )) instructions per request (400 requests, each after a 250 ms pause)"
