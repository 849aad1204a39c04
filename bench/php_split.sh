#!/usr/bin/env bash
# ab2009.sh's phpinfo row with the server's CPU and PHP-FPM's counted apart: one PHP-FPM pool
# (pm = static, 8 children, TCP) on CPU 0, up to four Shellac builds (A, B, C, D: a binary each,
# with its own environment and extra [[backend]] lines) and lighttpd (Debian's configuration
# plus mod_fastcgi, as ab2009.sh starts it) on CPU 0, `wrk -t1 -c50` on CPU 1 against
# /info.php (`<?php phpinfo();`), ROUNDS rounds of SECS s, the order rotated each round. Per
# measurement and as medians: microseconds of CPU per request of the server's process tree
# and of PHP-FPM's, with the 1-minute load. STRACE=NAME (A…D or L) adds `strace -c -f` on that
# server during round 1 (its table printed at the end; divide by the requests of that round);
# PERF=NAME records it with `perf record -g` into /tmp/perf-php-split.data.
#
#   A=target/release/shellac B=/other/shellac B_TOML='open_file_cache = 0' bench/prio.sh bench/php_split.sh
#   A=target/release/shellac A_ENV='RUST_LOG=warn' ROUNDS=5 STRACE=A bench/prio.sh bench/php_split.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
A=${A:-target/release/shellac}
ROUNDS=${ROUNDS:-3}
SECS=${SECS:-4}
LIGHTTPD=${LIGHTTPD:-1}
. bench/lib.sh
need_built "$A"
need_tools lighttpd php-fpm8.2 wrk
WWW_USER=www-data
(( EUID == 0 )) || WWW_USER=$(id -un)
chmod 755 "$TMP"
W=$TMP/www
mkdir -p "$W" "$TMP/php" "$TMP/lighttpd"
echo '<?php phpinfo();' >"$W/info.php"
chmod -R a+rX "$W"; chown -R "$WWW_USER" "$TMP/lighttpd" 2>/dev/null || true
P_FPM=$(free_port)
start_php_fpm "$TMP/php" "$P_FPM" 8 php-fpm8.2
declare -A PORT TREE
SERVERS=()
start_shellac_php() {  # NAME BINARY ENV BACKEND_LINES
  local p ad
  p=$(free_port); ad=$(free_port)
  cat >"$TMP/$1.toml" <<CONF
[server]
listen = ["127.0.0.1:$p"]
admin = "127.0.0.1:$ad"
threads = 1
[cache]
memory_size = "256MiB"
[[backend]]
name = "php"
protocol = "fastcgi"
host = "127.0.0.1"
port = $P_FPM
root = "$W"
max_connections = 8
max_queue = 4096
$4
[routing]
default = "php"
CONF
  # shellcheck disable=SC2086  # ENV is a list of VAR=VALUE words
  env $3 taskset -c 0 "$2" serve --config "$TMP/$1.toml" 2>"$TMP/$1.err" &
  PIDS+=($!); TREE[$1]=$!; PORT[$1]=$p; SERVERS+=("$1")
}
for s in A B C D; do
  bin=${!s:-}; envv=${s}_ENV; toml=${s}_TOML
  [[ -n $bin ]] && start_shellac_php "$s" "$bin" "${!envv:-SHELLAC_BENCH=1}" "${!toml:-}"
done
if (( LIGHTTPD )); then
  P_L=$(free_port)
  start_lighttpd "$TMP/lighttpd" "$P_L" "$W" "$P_FPM" 0
  TREE[L]=$LPID; PORT[L]=$P_L; SERVERS+=(L)
fi
for s in "${SERVERS[@]}"; do
  wait_http "http://127.0.0.1:${PORT[$s]}/info.php"
  curl -s -o /dev/null -w "$s: /info.php %{http_code}, %{size_download} bytes\n" "http://127.0.0.1:${PORT[$s]}/info.php"
  taskset -c 1 wrk -t1 -c50 -d1s "http://127.0.0.1:${PORT[$s]}/info.php" >/dev/null
done
hz=$(getconf CLK_TCK)
: >"$TMP/res.txt"
for r in $(seq "$ROUNDS"); do
  k=$(( (r - 1) % ${#SERVERS[@]} ))
  for s in "${SERVERS[@]:k}" "${SERVERS[@]:0:k}"; do
    s0=$(tree_ticks "${TREE[$s]}"); f0=$(tree_ticks "$FPID"); watcher=""
    if [[ $r == 1 && ${STRACE:-} == "$s" ]]; then
      timeout $((SECS + 2)) strace -c -f -o "$TMP/strace.txt" -p "${TREE[$s]}" 2>/dev/null & watcher=$!
    elif [[ $r == 1 && ${PERF:-} == "$s" ]]; then
      perf record -e cpu-clock -F 999 -g -p "${TREE[$s]}" -o /tmp/perf-php-split.data -- sleep "$SECS" >/dev/null 2>&1 & watcher=$!
    fi
    taskset -c 1 wrk -t1 -c50 -d"${SECS}s" "http://127.0.0.1:${PORT[$s]}/info.php" >"$TMP/wrk.txt"
    s1=$(tree_ticks "${TREE[$s]}"); f1=$(tree_ticks "$FPID")
    [[ -z $watcher ]] || { kill -INT "$watcher" 2>/dev/null || true; wait "$watcher" 2>/dev/null || true; }
    n=$(awk '/requests in/ {print $1}' "$TMP/wrk.txt")
    echo "$r $s $n $((s1 - s0)) $((f1 - f0)) $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$TMP/res.txt" |
      awk -v hz="$hz" -v secs="$SECS" '{printf "round %s %s: %.0f req/s, server %.1f µs/req, php-fpm %.1f µs/req, load %s\n", $1, $2, $3 / secs, $4 * 1e6 / hz / $3, $5 * 1e6 / hz / $3, $6}'
  done
done
python3 - "$TMP/res.txt" "$hz" <<'PY'
import statistics as st, sys
hz = float(sys.argv[2])
d = {}
for line in open(sys.argv[1]):
    r, s, n, sv, fp, load = line.split()
    n = int(n)
    d.setdefault(s, []).append((int(sv) * 1e6 / hz / n, int(fp) * 1e6 / hz / n, float(load)))
print("\n| server | server µs/req | min–max | php-fpm µs/req | total | load |\n|---|---|---|---|---|---|")
for s, v in d.items():
    sv = [x[0] for x in v]; fp = [x[1] for x in v]; ld = [x[2] for x in v]
    print(f"| {s} | {st.median(sv):.1f} | {min(sv):.1f}–{max(sv):.1f} | {st.median(fp):.1f} | "
          f"{st.median(x[0] + x[1] for x in v):.1f} | {min(ld):.1f}–{max(ld):.1f} |")
PY
[[ -f $TMP/strace.txt ]] && { echo; echo "strace -c -f of $STRACE (round 1):"; cat "$TMP/strace.txt"; }
true
