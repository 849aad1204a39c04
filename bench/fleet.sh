#!/usr/bin/env bash
# The fleet benchmark (issue 22): a Redis Cluster of 6 redis-server processes (3 masters, 3
# replicas) and three Shellac nodes on loopback, in front of bench/origin.rs, driven by
# bench/fleet_load.rs:
#   1. miss storm: KEYS distinct keys, each asked of the three nodes at the same moment —
#      origin requests per key without [storage.shared], then with it;
#   2. shared-tier hits: 6.3 KB objects fetched on node A, then read once each on node B
#      (local miss, shared hit): latency percentiles;
#   3. purge visibility: PURGEs sent to each node in turn, timed until no node (local tiers
#      or shared tier, GET /cache) has the URL;
#   4. a master killed with SIGKILL during a shared-hit load on nodes B and C (each key read
#      once: every read is a local miss the shared tier answers): client errors and latency
#      in the 5 s after the kill (read_timeout = 50 ms).
# Everything it starts is stopped on exit (bench/lib.sh).
#
#   cargo build --release --bins --examples && bench/fleet.sh
#   KEYS=20000 HIT_KEYS=5000 PURGES=200 bench/fleet.sh     # shorter
#   PHASES="hits purge" bench/fleet.sh                     # some of them (storm hits purge failover)
#   nice -n -15 bench/fleet.sh     # on a machine busy with other work (as root): latencies are
#                                  # otherwise the scheduler's
#   TLS=1 PHASES=hits bench/fleet.sh   # the cluster speaks only TLS (a CA, node and client
#                                      # certificates made here with openssl; tls-auth-clients
#                                      # yes) and the nodes use [storage.shared] tls
PHASES=${PHASES:-storm hits purge failover}
phase() { [[ " $PHASES " == *" $1 "* ]]; }
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SHELLAC=${SHELLAC:-target/release/shellac}
ORIGIN=${ORIGIN:-target/release/examples/origin}
LOAD=${LOAD:-target/release/examples/fleet_load}
KEYS=${KEYS:-100000}
HIT_KEYS=${HIT_KEYS:-20000}
PURGES=${PURGES:-500}
FAILOVER_KEYS=${FAILOVER_KEYS:-60000}
CONNS=${CONNS:-32}
command -v redis-server >/dev/null && command -v redis-cli >/dev/null ||
  { echo "needs redis-server and redis-cli (apt-get install redis-server redis-tools)" >&2; exit 1; }

. bench/lib.sh   # TMP, PIDS (stopped on exit), free_port, start_origin, need_built
need_built "$SHELLAC" "$ORIGIN" "$LOAD"

# A port whose cluster bus port (+10000) is free too.
redis_port() {
  local p
  while :; do
    p=$(free_port)
    (( p < 55000 )) && python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', $p + 10000))" 2>/dev/null && { echo "$p"; return; }
  done
}

# TLS=1: certificates (docs/fleet.md's commands), redis-server and redis-cli arguments, and
# the [storage.shared] line.
TLS=${TLS:-0}
SERVER_TLS=(); CLI_TLS=(); SHARED_TLS=""
if [[ $TLS == 1 ]]; then
  command -v openssl >/dev/null || { echo "TLS=1 needs openssl" >&2; exit 1; }
  (
    cd "$TMP"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
      -subj "/CN=bench Redis CA" -keyout ca.key -out ca.pem
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=redis" \
      -keyout redis.key -out redis.csr
    openssl x509 -req -in redis.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 \
      -extfile <(printf "subjectAltName=IP:127.0.0.1") -out redis.pem
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=shellac" \
      -keyout client.key -out client.csr
    openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 \
      -extfile <(printf "extendedKeyUsage=clientAuth") -out client.pem
  ) >/dev/null 2>&1
  SERVER_TLS=(--tls-cluster yes --tls-replication yes --tls-auth-clients yes
    --tls-cert-file "$TMP/redis.pem" --tls-key-file "$TMP/redis.key" --tls-ca-cert-file "$TMP/ca.pem")
  CLI_TLS=(--tls --cacert "$TMP/ca.pem" --cert "$TMP/client.pem" --key "$TMP/client.key")
  SHARED_TLS="tls = { ca = \"$TMP/ca.pem\", cert = \"$TMP/client.pem\", key = \"$TMP/client.key\" }"
fi
rcli() { redis-cli "${CLI_TLS[@]}" "$@"; }

REDIS_PORTS=()
REDIS_PIDS=()
for i in 1 2 3 4 5 6; do
  p=$(redis_port)
  mkdir -p "$TMP/redis-$p"
  if [[ $TLS == 1 ]]; then port_args=(--port 0 --tls-port "$p"); else port_args=(--port "$p"); fi
  (cd "$TMP/redis-$p" && exec redis-server "${port_args[@]}" --bind 127.0.0.1 --cluster-enabled yes \
    --cluster-config-file nodes.conf --cluster-node-timeout 1000 --appendonly no --save '' \
    --logfile redis.log "${SERVER_TLS[@]}") &
  PIDS+=($!); REDIS_PIDS+=($!); REDIS_PORTS+=("$p")
done
for p in "${REDIS_PORTS[@]}"; do
  for _ in $(seq 100); do rcli -p "$p" ping 2>/dev/null | grep -q PONG && break; sleep 0.05; done
done
timeout 30 redis-cli "${CLI_TLS[@]}" --cluster create $(printf '127.0.0.1:%s ' "${REDIS_PORTS[@]}") \
  --cluster-replicas 1 --cluster-yes >"$TMP/create.txt"
for _ in $(seq 200); do
  rcli -p "${REDIS_PORTS[0]}" cluster info | grep -q 'cluster_state:ok' && break; sleep 0.1
done
SEEDS=$(printf '"127.0.0.1:%s", ' "${REDIS_PORTS[@]}"); SEEDS=${SEEDS%, }

start_origin "$ORIGIN"

# start_node PREFIX (empty: no shared tier): prints "port admin pid".
start_node() {
  local port admin shared=""
  port=$(free_port); admin=$(free_port)
  [[ -n $1 ]] && shared=$(printf '[storage.shared]\nnodes = [%s]\nkey_prefix = "%s"\nnode_name = "n%s"\n%s\n' "$SEEDS" "$1" "$port" "$SHARED_TLS")
  printf '[server]\nlisten = ["127.0.0.1:%s"]\nadmin = "127.0.0.1:%s"\n\n[cache]\nmemory_size = "1GiB"\n\n[[backend]]\nhost = "127.0.0.1"\nport = %s\nmax_connections = 1000\n\n%s\n' \
    "$port" "$admin" "$ORIGIN_PORT" "$shared" > "$TMP/node-$port.toml"
  "$SHELLAC" serve --config "$TMP/node-$port.toml" 2>"$TMP/node-$port.err" &
  local pid=$!
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$admin/stats" && break; sleep 0.05; done
  # Connected to the cluster (the breaker closes at the first operation that succeeds).
  [[ -n $1 ]] && for _ in $(seq 200); do
    curl -s "http://127.0.0.1:$admin/fleet" | grep -q '"breaker":"closed"' && break; sleep 0.05
  done
  echo "$port $admin $pid"
}
stat() { curl -s "http://127.0.0.1:$1/stats" | python3 -c "import json,sys; print(json.load(sys.stdin)['$2'])"; }

# Three nodes; sets NODES, ADMINS, NODE_PIDS.
three_nodes() {
  NODES=(); ADMINS=(); NODE_PIDS=()
  for _ in 1 2 3; do
    read -r port admin pid < <(start_node "$1")
    PIDS+=("$pid"); NODES+=("127.0.0.1:$port"); ADMINS+=("$admin"); NODE_PIDS+=("$pid")
  done
}
stop_nodes() { kill -TERM "${NODE_PIDS[@]}"; wait "${NODE_PIDS[@]}" 2>/dev/null || true; }
origin_per_key() {
  local total=0 a
  for a in "${ADMINS[@]}"; do total=$(( total + $(stat "$a" backend_req) )); done
  python3 -c "print(f'{$total} origin requests, {$total / $KEYS:.3f} per key')"
}
csv() { local IFS=,; echo "$*"; }

if phase storm; then
  echo "== miss storm: $KEYS keys, each asked of 3 nodes at once ($CONNS keys at a time)"
  three_nodes ""
  "$LOAD" storm "$(csv "${NODES[@]}")" /obj/storm-a/ "$KEYS" "$CONNS" | sed 's/^/   without shared tier: /'
  echo "   without shared tier: $(origin_per_key)"
  stop_nodes
fi
three_nodes "bench:"
if phase storm; then
  "$LOAD" storm "$(csv "${NODES[@]}")" /obj/storm-b/ "$KEYS" "$CONNS" | sed 's/^/   with shared tier: /'
  echo "   with shared tier: $(origin_per_key)"
  for a in "${ADMINS[@]}"; do
    echo "   node $a: $(for c in shared_hit shared_lease shared_lease_wait shared_lease_waited_hit shared_lease_timeout shared_error shared_timeout; do printf '%s=%s ' $c "$(stat "$a" $c)"; done)"
  done
fi

if phase hits; then
  echo "== shared-tier hits: $HIT_KEYS objects of 6,451 bytes filled on node A, read once on node B"
  "$LOAD" hits "${NODES[0]}" "${NODES[1]}" /obj6k/hits/ "$HIT_KEYS" | sed 's/^/   /'
fi

if phase purge; then
  echo "== purge visibility: $PURGES purges, sent to each node in turn"
  "$LOAD" purge "$(csv "${NODES[@]}")" "$(csv "${ADMINS[@]/#/127.0.0.1:}")" /obj/purge/ "$PURGES" | sed 's/^/   /'
fi

phase failover || { stop_nodes; exit 0; }
MASTER_PID=""
for i in "${!REDIS_PORTS[@]}"; do
  if rcli -p "${REDIS_PORTS[$i]}" role | head -1 | grep -q master; then MASTER_PID=${REDIS_PIDS[$i]}; break; fi
done
echo "== a master (pid $MASTER_PID) killed 1.5 s into shared-tier reads on nodes B and C ($FAILOVER_KEYS keys, each read once, 10 s at most)"
"$LOAD" failover "${NODES[0]}" "$(csv "${NODES[1]}" "${NODES[2]}")" /obj6k/failover/ "$FAILOVER_KEYS" 10 "$MASTER_PID" 1500 | sed 's/^/   /'
for a in "${ADMINS[@]:1}"; do
  echo "   node $a: $(for c in shared_hit shared_timeout shared_error shared_skipped shared_breaker_open; do printf '%s=%s ' $c "$(stat "$a" $c)"; done)"
done
stop_nodes
