#!/usr/bin/env bash
# User-space instructions per hit on issue 31's two hit rows (bench/ab2009.sh's Shellac
# config: `threads = 1`, a files backend, PHP-FPM behind a fastcgi backend, the `/cached/`
# rule), counted by callgrind: Shellac runs under callgrind, the object is warmed into the
# cache, the counters are zeroed (`callgrind_control --zero`), then `wrk -t1 -c50` runs SECS s.
# Result = instructions after the zeroing / requests counted by Shellac (`client_req`) in that
# time. Each row prints one line.
#
#   cargo build --release && bench/hit_instructions.sh               # both rows, SECS=8
#   ROWS=static6k SHELLAC=/path/shellac bench/hit_instructions.sh
#   CALLGRIND_OUT=/tmp/cg bench/hit_instructions.sh   # keeps /tmp/cg.static6k, /tmp/cg.phpcached
#     then: callgrind_annotate --inclusive=yes /tmp/cg.static6k
#
# static6k: GET /file6k.png (6,451 bytes from the files backend, cached by its own freshness);
# phpcached: GET /cached/info.php (phpinfo() from PHP-FPM, cached 1 h by the rule: one miss,
# then hits only).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SHELLAC=${SHELLAC:-target/release/shellac}
SECS=${SECS:-8}
ROWS=${ROWS:-static6k phpcached}
FPM=${FPM:-php-fpm8.2}
. bench/lib.sh
need_built "$SHELLAC"
need_tools valgrind callgrind_control wrk curl "$FPM"
WWW_USER=www-data
(( EUID == 0 )) || WWW_USER=$(id -un)

chmod 755 "$TMP"
W=$TMP/www
mkdir -p "$W/cached" "$TMP/php"
head -c 6451 /dev/urandom >"$W/file6k.png"
echo '<?php phpinfo();' >"$W/cached/info.php"
touch -d '2022-01-01 00:00:00' "$W"/*.* "$W"/cached/*
chmod -R a+rX "$W"
P_FPM=$(free_port)
start_php_fpm "$TMP/php" "$P_FPM" 2 "$FPM"  # 2 children: one miss, then hits

row() {  # NAME PATH
  local name=$1 path=$2 port admin out vp r0 r1
  port=$(free_port); admin=$(free_port)
  out=${CALLGRIND_OUT:-$TMP/cg}.$name
  ab2009_shellac_config "$TMP/shellac.toml" "$port" "$admin" "$W" "$P_FPM" 2 false
  valgrind --tool=callgrind --callgrind-out-file="$out" "$SHELLAC" serve \
    --config "$TMP/shellac.toml" 2>"$TMP/valgrind.$name" &
  vp=$!
  PIDS+=("$vp")
  # Under callgrind start-up and the first miss take seconds: wait up to 60 s for a hit.
  local _ hit=0
  for _ in $(seq 300); do
    if curl -s -D - -o /dev/null "http://127.0.0.1:$port$path" 2>/dev/null \
      | grep -qi '^cache-status: shellac; hit'; then hit=1; break; fi
    sleep 0.2
  done
  (( hit )) || { echo "$name: no cache hit for $path" >&2; exit 1; }
  # Warm-up: the connections' first requests, the pools and caches of every layer.
  timeout 60 wrk -t1 -c50 -d2s "http://127.0.0.1:$port$path" >/dev/null
  r0=$(stat_req "$admin")
  callgrind_control --zero "$vp" >/dev/null 2>&1
  timeout $((SECS + 60)) wrk -t1 -c50 -d"${SECS}s" "http://127.0.0.1:$port$path" >/dev/null
  r1=$(stat_req "$admin")
  callgrind_control --dump "$vp" >/dev/null 2>&1
  kill -INT "$vp"; wait "$vp" 2>/dev/null || true
  # The dump after the zeroing is the file with the highest number (out.1, out.2 ...); the
  # final dump at exit (out) holds only what ran after it.
  local dump
  dump=$(ls -v "$out".* 2>/dev/null | tail -1)
  python3 - "$name" "$r0" "$r1" "$dump" <<'PY'
import sys, re
name, r0, r1, dump = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
ir = None
for line in open(dump):
    m = re.match(r'^(summary|totals): (\d+)', line)
    if m:
        ir = int(m.group(2)); break
n = r1 - r0
print(f'{name}: requests={n} instructions={ir} instructions/hit={ir / n:.0f} ({dump})')
PY
}
stat_req() {
  curl -s "http://127.0.0.1:$1/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["client_req"])'
}

for r in $ROWS; do
  case $r in
    static6k) row static6k /file6k.png ;;
    phpcached) row phpcached /cached/info.php ;;
    *) echo "unknown row $r" >&2; exit 2 ;;
  esac
done
