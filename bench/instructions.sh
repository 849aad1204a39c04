#!/usr/bin/env bash
# User-space instructions per cache hit, counted by valgrind's callgrind: repeatable whatever
# else the machine is doing (timings are not). Shellac runs under callgrind in front of the
# reference server (6451-byte body, max-age=3600); wrk drives GET /hit6k over 10 keep-alive
# connections. Result = (Ir of a loaded run - Ir of a startup-only run) / requests.
#
#   cargo build --release --bins --example reference
#   bench/instructions.sh            # SECS=8 of load
#   CALLGRIND_OUT=/tmp/cg.out bench/instructions.sh && callgrind_annotate --inclusive=yes /tmp/cg.out
#   ACCESS_LOG=combined bench/instructions.sh   # access log on (combined|common|json|"%h ..."),
#                                               # written to a temporary file; also prints the
#                                               # share spent in the log writer thread
#   PIN=0 bench/instructions.sh                 # Shellac on CPU 0 only (one worker thread, as
#                                               # in bench/run.sh and bench/access_log.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
SHELLAC=${SHELLAC:-target/release/shellac}
REFERENCE=${REFERENCE:-target/release/examples/reference}
SECS=${SECS:-8}
OUT=${CALLGRIND_OUT:-$(mktemp -t shellac-cg.XXXXXX)}
for tool in valgrind wrk curl python3; do
  command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install -y valgrind wrk curl)"; exit 1; }
done
read -r P_ORIGIN P_PROXY P_ADMIN < <(python3 -c '
import socket
s = [socket.socket() for _ in range(3)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
PIDS=()
TMP=$(mktemp -d -t shellac-ir.XXXXXX)
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$TMP"; }
trap cleanup EXIT
# The flags below override listen, admin and backend; the file only adds the access log.
CONFIG=()
if [[ -n ${ACCESS_LOG:-} ]]; then
  printf '[log]\naccess_log = "%s"\nformat = "%s"\n\n[[backend]]\nhost = "127.0.0.1"\nport = 1\n' \
    "$TMP/access.log" "${ACCESS_LOG//\"/\\\"}" > "$TMP/shellac.toml"
  CONFIG=(--config "$TMP/shellac.toml")
fi
"$REFERENCE" "127.0.0.1:$P_ORIGIN" 6451 2>/dev/null & PIDS+=($!)
sleep 0.3

run() {  # SECONDS_OF_LOAD -> "requests instructions"
  local pin=()
  if [[ -n ${PIN:-} ]]; then pin=(taskset -c "$PIN"); fi
  "${pin[@]}" valgrind --tool=callgrind --callgrind-out-file="$OUT" "$SHELLAC" serve "${CONFIG[@]}" \
    --listen "127.0.0.1:$P_PROXY" --admin "127.0.0.1:$P_ADMIN" --backend "127.0.0.1:$P_ORIGIN" \
    2>/dev/null &
  local vp=$!
  PIDS+=("$vp")
  for _ in $(seq 150); do curl -s -o /dev/null "http://127.0.0.1:$P_PROXY/hit6k" && break; sleep 0.2; done
  if (( $1 > 0 )); then wrk -t1 -c10 -d"$1s" "http://127.0.0.1:$P_PROXY/hit6k" >/dev/null; fi
  local req
  req=$(curl -s "http://127.0.0.1:$P_ADMIN/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["client_req"])')
  kill -INT "$vp"; wait "$vp" 2>/dev/null || true
  # Inclusive instructions of the access-log writer thread (its entry point, where
  # `writer::run` is inlined into the thread's start; 0 with the log off). awk reads to the
  # end: an early exit would kill callgrind_annotate with SIGPIPE (and this script, pipefail).
  local writer
  writer=$(callgrind_annotate --inclusive=yes --threshold=100 "$OUT" 2>/dev/null \
    | awk '!v && /txlog\/writer.rs:(std::sys::backtrace::__rust_begin_short_backtrace|shellac::txlog::writer::run)/ {gsub(",", "", $1); v = $1} END {print v + 0}')
  echo "$req $(awk '/^(summary|totals):/ {print $2; exit}' "$OUT") ${writer:-0}"
}
read -r R0 I0 W0 < <(run 0)
read -r R1 I1 W1 < <(run "$SECS")
python3 -c "
n = $R1 - $R0
print(f'requests={n} instructions/hit={($I1 - $I0) / n:.0f} of which log writer thread={($W1 - $W0) / n:.0f}')"
if [[ -n ${ACCESS_LOG:-} ]]; then
  echo "access log lines: $(wc -l < "$TMP/access.log")"
fi
