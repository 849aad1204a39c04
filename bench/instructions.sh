#!/usr/bin/env bash
# User-space instructions per cache hit, counted by valgrind's callgrind: repeatable whatever
# else the machine is doing (timings are not). Shellac runs under callgrind in front of the
# reference server (6451-byte body, max-age=3600); wrk drives GET /hit6k over 10 keep-alive
# connections. Result = (Ir of a loaded run - Ir of a startup-only run) / requests.
#
#   cargo build --release --bins --example reference
#   bench/instructions.sh            # SECS=8 of load
#   CALLGRIND_OUT=/tmp/cg.out bench/instructions.sh && callgrind_annotate --inclusive=yes /tmp/cg.out
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
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
"$REFERENCE" "127.0.0.1:$P_ORIGIN" 6451 2>/dev/null & PIDS+=($!)
sleep 0.3

run() {  # SECONDS_OF_LOAD -> "requests instructions"
  valgrind --tool=callgrind --callgrind-out-file="$OUT" "$SHELLAC" serve \
    --listen "127.0.0.1:$P_PROXY" --admin "127.0.0.1:$P_ADMIN" --backend "127.0.0.1:$P_ORIGIN" \
    2>/dev/null &
  local vp=$!
  PIDS+=("$vp")
  for _ in $(seq 150); do curl -s -o /dev/null "http://127.0.0.1:$P_PROXY/hit6k" && break; sleep 0.2; done
  if (( $1 > 0 )); then wrk -t1 -c10 -d"$1s" "http://127.0.0.1:$P_PROXY/hit6k" >/dev/null; fi
  local req
  req=$(curl -s "http://127.0.0.1:$P_ADMIN/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["client_req"])')
  kill -INT "$vp"; wait "$vp" 2>/dev/null || true
  echo "$req $(awk '/^(summary|totals):/ {print $2; exit}' "$OUT")"
}
read -r R0 I0 < <(run 0)
read -r R1 I1 < <(run "$SECS")
python3 -c "print(f'requests={$R1 - $R0} instructions/hit={($I1 - $I0) / ($R1 - $R0):.0f}')"
