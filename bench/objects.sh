#!/usr/bin/env bash
# Workload 8 for Shellac alone, quickly: a fresh Shellac (one worker, 4 GiB cache) in front of
# bench/origin.rs, N distinct 100-byte objects fetched once each, RSS growth per object and
# beyond what is stored (body + the origin's header fields + key), as bench/run.sh computes it.
#   N=200000 [PRELOAD=allocator.so] bench/objects.sh [BINARY]
# BOUND=1 [OBJ=6451] [MB=64]: workload 8's second half instead: an MB MiB cache filled with
# distinct OBJ-byte objects, 3x the cache size (so it evicts everything about three times over),
# RSS growth beyond the base measured before the fill, against the configured size.
# SHIFT=1 [MB=64]: a MB MiB cache whose objects change size (100, 1500, 700, 100-byte bodies, each
# phase ~3x the cache), RSS after each phase against the configured size.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
N=${N:-200000}
BIN=${1:-target/release/shellac}
CLIENTS=target/release/examples/clients
need_built "$BIN" target/release/examples/origin "$CLIENTS"
start_origin target/release/examples/origin
MB=${MB:-64}
SIZE=4GiB; (( ${BOUND:-0} || ${SHIFT:-0} )) && SIZE=${MB}MiB
read -r PORT ADMIN PID < <(start_shellac "$BIN" $'\n[cache]\nmemory_size = "'$SIZE'"' ${PRELOAD:+"LD_PRELOAD=$PRELOAD"})
PIDS+=("$PID")
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break; sleep 0.05; done
taskset -c 1 "$CLIENTS" unique "127.0.0.1:$PORT" "/obj/warm-" 1000 20 >/dev/null 2>&1 || true
sleep 1
rss0=$(awk '/^VmRSS/ {print $2}' "/proc/$PID/status")
if (( ${SHIFT:-0} )); then
  # Sizes that change under eviction: the memory tier's slabs must give back what one size
  # class no longer uses. Four rounds through the cache, ~3x its size each.
  for phase in 100:400000 1500:90000 700:170000 100:400000; do
    size=${phase%%:*} n=$(( ${phase##*:} * MB / 64 ))
    taskset -c 1 "$CLIENTS" unique "127.0.0.1:$PORT" "/sized/$size/s$phase-" "$n" 100 >"$TMP/fill.txt" 2>&1
    sleep 1
    rss=$(awk '/^VmRSS/ {print $2}' "/proc/$PID/status")
    awk -v s="$size" -v n="$n" -v r="$rss" -v r0="$rss0" -v mb="$MB" 'BEGIN{printf "%d MiB cache, %d x %d-byte bodies: rss=%.1fMiB rss/size=%.2f (rss-rss0)/size=%.2f\n", mb, n, s, r/1024, r/1024/mb, (r-r0)/1024/mb}'
  done
  curl -s "http://127.0.0.1:$ADMIN/stats" 2>/dev/null | grep -E '"(n_object|n_lru_nuked|cache_bytes|cache_slab_bytes|cache_slot_bytes)"' | tr -d ' \n'; echo
  exit 0
fi
if (( ${BOUND:-0} )); then
  OBJ=${OBJ:-6451}
  path="/sized/$OBJ/b-"; (( OBJ == 6451 )) && path="/obj6k/b-"
  n=$(( (3 * MB * 1048576 + OBJ - 1) / OBJ ))
  conns=$(( n < 50 ? n : 50 ))
  cpu0=$(cpu_ticks "$PID")
  taskset -c 1 "$CLIENTS" unique "127.0.0.1:$PORT" "$path" "$n" "$conns" >"$TMP/fill.txt" 2>&1
  cpu1=$(cpu_ticks "$PID")
  sleep 2
  rss1=$(awk '/^VmRSS/ {print $2}' "/proc/$PID/status")
  awk -v a="$rss0" -v b="$rss1" -v mb="$MB" -v n="$n" -v o="$OBJ" -v e="$(awk '$1 == "ERRORS" {print $2}' "$TMP/fill.txt")" \
    -v us="$(( (cpu1 - cpu0) * 1000000 / $(getconf CLK_TCK) ))" \
    'BEGIN{printf "%d MiB cache, %d x %d B: rss0=%.1fMiB rss1=%.1fMiB rss1/size=%.2f (rss1-rss0)/size=%.2f cpu/miss=%.0fus errors=%s\n", mb, n, o, a/1024, b/1024, b/1024/mb, (b-a)/1024/mb, us/n, e}'
  curl -s "http://127.0.0.1:$ADMIN/stats" 2>/dev/null | grep -E '"(n_object|n_lru_nuked|cache_bytes|cache_slab_bytes|mem_trim)"' | tr -d ' \n'; echo
  exit 0
fi
taskset -c 1 "$CLIENTS" unique "127.0.0.1:$PORT" "/obj/o-" "$N" 100 >"$TMP/fill.txt" 2>&1
sleep 2
rss1=$(awk '/^VmRSS/ {print $2}' "/proc/$PID/status")
hdr=$(curl -s -D - -o /dev/null "http://127.0.0.1:$ORIGIN_PORT/obj/o-1" \
  | tr -d '\r' | awk -F': ' 'NR > 1 && NF >= 2 {n += length($1) + length($0) - length($1) - 2} END {print n + 0}')
key=$(awk -v n="$N" 'BEGIN{ d = 0; for (p = 1; p <= n; p *= 10) { c = (n < p * 10 ? n : p * 10) - p; d += c * (length(p "")) } printf "%.1f", length("127.0.0.1:/obj/o-") + 5 + d / n }')
python3 - "$rss0" "$rss1" "$N" "$hdr" "$key" "errors=$(awk '$1 == "ERRORS" {print $2}' "$TMP/fill.txt")" <<'PY'
import sys
r0, r1, n, hdr, key = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
per = (r1 - r0) * 1024 / n
stored = 100 + hdr + key
print(f"objects={n} rss0={r0/1024:.1f}MiB rss1={r1/1024:.1f}MiB per_object={per:.0f}B stored={stored:.0f}B overhead={per - stored:.0f}B {sys.argv[6]}")
PY
curl -s "http://127.0.0.1:$ADMIN/stats" 2>/dev/null | grep -E '"(n_object|cache_insert|n_lru_nuked)"' | tr -d ' \n'; echo
