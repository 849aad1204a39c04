#!/usr/bin/env bash
# Slow-client attacks against a release Shellac with slowhttptest (Debian package), in short
# bounded runs: slow headers (slowloris), slow body (R-U-Dead-Yet), slow read, Range. Each mode
# holds CONNS connections for SECS seconds while slowhttptest probes whether the service still
# answers; Shellac's timeouts are tightened so they act within the run. Prints slowhttptest's
# verdict per mode and the counters that show which timeout closed what.
#
#   cargo build --release --bins --example reference
#   bench/slow.sh                 # CONNS=500 SECS=20
# Not part of CI (each mode takes SECS seconds); tests/hardening/slow_clients.rs runs three of
# these modes in short bounded runs, and raw-socket tests in tests/hardening/limits.rs and
# tests/caching/errors.rs cover the same defences.
set -euo pipefail
cd "$(dirname "$0")/.."
SHELLAC=${SHELLAC:-target/release/shellac}
REFERENCE=${REFERENCE:-target/release/examples/reference}
CONNS=${CONNS:-500}
SECS=${SECS:-20}
command -v slowhttptest >/dev/null || { echo "missing slowhttptest (apt-get install -y slowhttptest)"; exit 1; }
T=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$T"; }
trap cleanup EXIT
read -r P_ORIGIN P_PROXY P_ADMIN < <(python3 -c '
import socket
s = [socket.socket() for _ in range(3)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
"$REFERENCE" "127.0.0.1:$P_ORIGIN" 6451 2>/dev/null & PIDS+=($!)
cat >"$T/shellac.toml" <<TOML
[server]
listen = ["127.0.0.1:$P_PROXY"]
admin = "127.0.0.1:$P_ADMIN"
header_read_timeout = "5s"
body_timeout = "5s"
body_min_rate = "1KiB"
send_timeout = "5s"
idle_timeout = "10s"

[[backend]]
host = "127.0.0.1"
port = $P_ORIGIN
TOML
"$SHELLAC" serve --config "$T/shellac.toml" 2>"$T/shellac.log" & PIDS+=($!)
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$P_PROXY/x" && break; sleep 0.1; done
URL="http://127.0.0.1:$P_PROXY/hit6k"
run() {
  local name=$1; shift
  echo "== $name"
  slowhttptest "$@" -c "$CONNS" -r 200 -l "$SECS" -u "$URL" -p 3 -g -o "$T/$name" >"$T/$name.out" 2>&1 || true
  # The last status block: the service-available verdict and the connection states.
  grep -E "service available|closed|pending|connected|error" "$T/$name.out" | tail -5
  curl -s -o /dev/null -w "after the run: %{http_code} in %{time_total}s\n" "$URL"
}
run slowloris -H -i 2
run slow-body -B -i 2 -s 100000
run slow-read -X -k 3 -n 5 -w 1 -y 2 -z 1
run range -R -a 1 -b 3000
curl -s "http://127.0.0.1:$P_ADMIN/stats" | python3 -c '
import json, sys
s = json.load(sys.stdin)
for k in ["client_conn", "client_header_timeout", "client_body_timeout", "client_send_timeout",
          "client_idle_closed", "client_conn_refused", "client_reject_limit", "client_req"]:
    print(f"{k} = {s.get(k)}")'
