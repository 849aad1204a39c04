#!/usr/bin/env bash
# Access-log cost on the hit path (issue 6, incident 4 of the brief): Shellac with the access
# log off vs on (NCSA combined to a file, and JSON lines), 200 keep-alive connections, a 100-byte
# cached object, wrk on another CPU. Alternates the modes run by run (each round starting with
# another) so machine noise hits all of them alike; prints each run and the medians.
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

. bench/lib.sh   # TMP, PIDS (stopped on exit), free_port


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
  local hit=""
  for _ in $(seq 200); do
    if curl -si "http://127.0.0.1:$port/small100" 2>/dev/null | grep -qi '^cache-status: shellac; hit'; then
      hit=1; break
    fi
    sleep 0.05
  done
  [[ -n $hit ]] || { echo "no cache hit in mode $mode:" >&2; cat "$TMP/$mode.err" >&2; kill $pid 2>/dev/null; exit 1; }
  timeout 30 taskset -c 1 wrk -t1 -c"$CONNS" -d2s "http://127.0.0.1:$port/small100" >/dev/null
  local out cpu0 cpu1
  cpu0=$(awk '{print $14 + $15}' /proc/$pid/stat)
  out=$(timeout $((DURATION + 30)) taskset -c 1 wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency "http://127.0.0.1:$port/small100")
  cpu1=$(awk '{print $14 + $15}' /proc/$pid/stat)
  local rps p99 dropped lines requests cpu_us
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  requests=$(awk '/requests in/ {print $1}' <<<"$out")
  # CPU time Shellac (all its threads, the log writer included) spent per request: unlike
  # req/s, this barely moves when neighbours steal the CPU.
  cpu_us=$(python3 -c "print(round(($cpu1 - $cpu0) * 1e6 / $(getconf CLK_TCK) / max($requests, 1), 2))")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  dropped=$(curl -s "http://127.0.0.1:$admin/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["log_dropped"])')
  kill -TERM $pid; wait $pid 2>/dev/null || true
  lines=0
  [[ -f $TMP/access-$mode.log ]] && lines=$(wc -l < "$TMP/access-$mode.log") && rm -f "$TMP/access-$mode.log"
  printf '%-9s run %s: %10s req/s  %6s µs CPU/request  p99 %8s  log lines %9s  log_dropped %s\n' "$mode" "$2" "$rps" "$cpu_us" "$p99" "$lines" "$dropped" >&2
  echo "$rps $cpu_us"
}

# Each round runs off, combined and json back to back, starting with a different one each
# round (a fixed order measured the mode right after "off" ~6 points low, every round); the
# ratio to "off" is taken within the round (so a noisy neighbour slowing a whole round cancels
# out), then the median over rounds.
declare -A RESULTS RATIOS CPU CPURATIOS
MODES=(off combined json)
for run in $(seq "$RUNS"); do
  declare -A RPS=() US=()
  for i in 0 1 2; do
    mode=${MODES[$(( (run + i) % 3 ))]}
    read -r rps cpu < <(run_mode "$mode" "$run")
    RPS[$mode]=$rps; US[$mode]=$cpu
  done
  for mode in "${MODES[@]}"; do
    RESULTS[$mode]+="${RPS[$mode]} "
    CPU[$mode]+="${US[$mode]} "
    RATIOS[$mode]+="$(python3 -c "print(100*${RPS[$mode]}/${RPS[off]})") "
    CPURATIOS[$mode]+="$(python3 -c "print(100*${US[off]}/max(${US[$mode]}, 0.001))") "
  done
done

echo
echo "access log cost, hit path, $CONNS connections, 1 worker thread on CPU 0, wrk on CPU 1, ${DURATION}s x $RUNS rounds:"
for mode in off combined json; do
  printf '  %-9s median %8.0f req/s (%5.1f%% of off, median per-round ratio)   %6.2f µs CPU/request (off/this: %5.1f%%)\n' \
    "$mode" "$(median ${RESULTS[$mode]})" "$(median ${RATIOS[$mode]})" \
    "$(median ${CPU[$mode]})" "$(median ${CPURATIOS[$mode]})"
done
echo "  (off/this CPU per request = the req/s this mode keeps at equal CPU; the goal is >= 95%)"
