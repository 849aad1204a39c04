#!/usr/bin/env bash
# Access-log cost on the hit path (issue 6, incident 4 of the brief): Shellac with the access
# log off vs on (NCSA combined to a file, and JSON lines), 200 keep-alive connections, a 100-byte
# cached object, wrk on another CPU. Alternates the modes run by run so machine noise hits
# all of them alike; prints each run and the medians.
#
#   cargo build --release && bench/access_log.sh          # DURATION=10 RUNS=3
#   DURATION=3 RUNS=1 bench/access_log.sh                 # quick look
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
DURATION=${DURATION:-10}
RUNS=${RUNS:-3}
CONNS=${CONNS:-200}
SHELLAC=${SHELLAC:-target/release/shellac}
[[ -x $SHELLAC ]] || { echo "build first: cargo build --release" >&2; exit 1; }
command -v wrk >/dev/null || { echo "needs wrk (apt-get install wrk)" >&2; exit 1; }

TMP=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$TMP"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Origin: a 100-byte body, Cache-Control: max-age=3600 (fetched once per mode).
ORIGIN_PORT=$(free_port)
cat > "$TMP/origin.py" <<'PY'
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Cache-Control", "public, max-age=3600")
        self.send_header("Content-Length", "100")
        self.end_headers()
        self.wfile.write(b"x" * 100)
    def log_message(self, *a):
        pass
HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
taskset -c 1 python3 "$TMP/origin.py" "$ORIGIN_PORT" &
PIDS+=($!)
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$ORIGIN_PORT/" && break; sleep 0.05; done

run_mode() { # mode run -> prints req/s
  local mode=$1 port admin log_section=""
  port=$(free_port); admin=$(free_port)
  case $mode in
    off) log_section='[log]
access_log = "off"' ;;
    combined) log_section="[log]
access_log = \"$TMP/access-$mode.log\"
format = \"combined\"" ;;
    json) log_section="[log]
access_log = \"$TMP/access-$mode.log\"
format = \"json\"" ;;
  esac
  cat > "$TMP/$mode.toml" <<TOML
[server]
listen = ["127.0.0.1:$port"]
admin = "127.0.0.1:$admin"
threads = 1

$log_section

[[backend]]
host = "127.0.0.1"
port = $ORIGIN_PORT
TOML
  taskset -c 0 "$SHELLAC" serve --config "$TMP/$mode.toml" 2>"$TMP/$mode.err" &
  local pid=$!
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/small100" && break; sleep 0.05; done
  curl -s -o /dev/null "http://127.0.0.1:$port/small100"
  curl -si "http://127.0.0.1:$port/small100" | grep -qi '^cache-status: shellac; hit' \
    || { echo "not a hit in mode $mode" >&2; kill $pid; exit 1; }
  timeout 30 taskset -c 1 wrk -t1 -c"$CONNS" -d2s "http://127.0.0.1:$port/small100" >/dev/null
  local out
  out=$(timeout $((DURATION + 30)) taskset -c 1 wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency "http://127.0.0.1:$port/small100")
  local rps p99 dropped lines
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  dropped=$(curl -s "http://127.0.0.1:$admin/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["log_dropped"])')
  kill -TERM $pid; wait $pid 2>/dev/null || true
  lines=0
  [[ -f $TMP/access-$mode.log ]] && lines=$(wc -l < "$TMP/access-$mode.log") && rm -f "$TMP/access-$mode.log"
  printf '%-9s run %s: %10s req/s  p99 %8s  log lines %9s  log_dropped %s\n' "$mode" "$2" "$rps" "$p99" "$lines" "$dropped" >&2
  echo "$rps"
}

declare -A RESULTS
for run in $(seq "$RUNS"); do
  for mode in off combined json; do
    RESULTS[$mode]+="$(run_mode "$mode" "$run") "
  done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
off=$(median <<<"${RESULTS[off]}")
echo
echo "access log cost, hit path, $CONNS connections, 1 worker thread on CPU 0, wrk on CPU 1, ${DURATION}s x $RUNS runs (median):"
for mode in off combined json; do
  m=$(median <<<"${RESULTS[$mode]}")
  printf '  %-9s %10.0f req/s  %6.1f%% of off\n' "$mode" "$m" "$(python3 -c "print(100*$m/$off)")"
done
