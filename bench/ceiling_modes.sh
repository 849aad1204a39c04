#!/usr/bin/env bash
# bench/ceiling.c's modes side by side, per body size: the least a server can spend per
# keep-alive response on this kernel's loopback by each way of sending it (bench/RESULTS.md,
# "twelfth stop: send"). Per round, for each size and mode: the ceiling on CPU 0 sending a
# response of a Shellac-like head (213 bytes with SIZE 69478) and SIZE random bytes, `wrk -t1
# -cCONNS -dSECS` on CPU 1 (CONNS 50 unless set), then requests per CPU-second of the ceiling
# (its own getrusage at SIGTERM) and the MiB per second the client received.
#
#   bench/prio.sh bench/ceiling_modes.sh                   # SIZES="6451 69478", all modes
#   SIZES="16384 32768" MODES="writev splice2" ROUNDS=3 bench/prio.sh bench/ceiling_modes.sh
#   HEADOFF=3950 MODES=splice2 bench/prio.sh bench/ceiling_modes.sh   # the head across a page
#   SIZES="524288 1048576 22020096" MODES="writev splice1" CONNS=10 bench/prio.sh bench/ceiling_modes.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SIZES=${SIZES:-6451 69478}
MODES=${MODES:-writev splice splice1 splice2 tee sendfile}
ROUNDS=${ROUNDS:-2}
SECS=${SECS:-4}
CONNS=${CONNS:-50}
. bench/lib.sh
need_tools cc wrk curl
cc -O2 -o "$TMP/ceiling" bench/ceiling.c
for size in $SIZES; do
  { printf 'HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=UTF-8\r\n'
    printf 'last-modified: Sat, 01 Jan 2022 00:00:00 GMT\r\ncontent-length: %d\r\n' "$size"
    printf 'age: 0\r\nvia: 1.1 shellac\r\naccept-ranges: bytes\r\n'
    printf 'date: Sun, 29 Nov 2026 18:40:00 GMT\r\n\r\n'
    head -c "$size" /dev/urandom; } >"$TMP/r$size.http"
done
echo "| round | body bytes | mode | requests | CPU s | req per CPU-s | MiB/s |"
echo "|---|---|---|---|---|---|---|"
for round in $(seq "$ROUNDS"); do
  for size in $SIZES; do
    for mode in $MODES; do
      port=$(free_port)
      taskset -c 0 "$TMP/ceiling" "$mode" "$port" "$TMP/r$size.http" 2>"$TMP/ceiling.err" &
      pid=$!
      for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
      req=$(taskset -c 1 wrk -t1 -c"$CONNS" -d"${SECS}s" "http://127.0.0.1:$port/" | awk '/requests in/{print $1}')
      kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
      cpu=$(awk '/^cpu/{print $2}' "$TMP/ceiling.err")
      awk -v r="$round" -v s="$size" -v m="$mode" -v n="$req" -v c="$cpu" -v t="$SECS" \
        'BEGIN { printf "| %d | %d | %s | %d | %.3f | %.0f | %.1f |\n", r, s, m, n, c, n / c, n * s / t / 1048576 }'
    done
  done
done
