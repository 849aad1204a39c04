#!/usr/bin/env bash
# Issue 31's replay of the 2009 operator's benchmark (BRIEF.md item 5: 10,000 requests, 50
# connections, keep-alive) against today's servers, side by side in one run, each server on
# CPU 0 (wrk -t1 on CPU 1), one at a time, ROUNDS rounds interleaving them (each round measures
# every server once, starting one server later than the round before), so that the per-round
# ratios compare servers measured close in time and the summary gives medians and min–max:
#   static6k   a 6,451-byte file (6.3 KiB, a .png: no server compresses it), 50 connections
#   phpinfo    /info.php (`<?php phpinfo();`) over FastCGI to one PHP-FPM pool, 50 connections
#   phpcached  /cached/info.php, the same script, cached by a rule (Shellac `ttl`, nginx
#              fastcgi_cache, Varnish `beresp.ttl`), 50 connections
#   phpcached-gzip  the same from a client sending `Accept-Encoding: gzip` (Shellac stores the
#              page gzipped and decodes it for the identity clients above; nginx and Varnish,
#              without gzip settings, send identity to both)
#   flv        a 22,020,096-byte (21 MiB) .flv, 10 connections (MiB/s)
#   flvseek    the same with ?start=11010048 (the FLV header + the second half), 10 connections
# Servers (all Debian's): Shellac (files backend, fastcgi backend, rules); nginx 1.22 (sendfile
# on, open_file_cache, fastcgi_keep_conn + upstream keepalive, flv); lighttpd (Debian's shipped
# /etc/lighttpd/lighttpd.conf with this run's root, port and paths, plus mod_fastcgi and
# mod_flv_streaming when it loads); Apache 2.4 (event MPM + proxy_fcgi); Varnish 7.1 in front
# of that Apache. The PHP-FPM pool (pm = static, PHP_CHILDREN children, TCP) is shared by all
# and runs on CPU 0 too; for the PHP rows its CPU is counted with the server's (for Varnish,
# Apache's CPU is counted with Varnish's on every row). wrk runs SECS s per measurement rather
# than 10,000 requests: 10,000 hits last ~0.1 s here, too short to read a CPU time from.
# Server `ceiling` (static6k and phpcached rows): bench/ceiling.c, built with cc, one process
# per row, sending Shellac's own answer for that row's URL (head and body, captured once):
# for phpcached in mode $CEILING (default splice1: head and body in one vmsplice, then one
# splice), for static6k in mode $CEILING_STATIC (default writev: one copy, what every server
# here does for a 6.3 KB body) — the least a server can spend per request on this kernel's
# loopback, for the row's goal to be read against. CEILING_STATIC=splice1 gives the copy-free
# bound.
# Before measuring, the script checks and prints what each server sends for the 6.3 KB file
# (status, head bytes, body identical to the file, the connection kept for a second request)
# and that every process of every server runs on CPU 0 only.
#
#   cargo build --release && bench/prio.sh bench/ab2009.sh    # ROUNDS=3 SECS=5 PHP_CHILDREN=8
#   ONLY="static6k flv" bench/prio.sh bench/ab2009.sh
#   SERVERS="shellac nginx lighttpd" ONLY=static6k ROUNDS=9 SECS=4 bench/prio.sh bench/ab2009.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SHELLAC=${SHELLAC:-target/release/shellac}
ROUNDS=${ROUNDS:-3}
SECS=${SECS:-5}
PHP_CHILDREN=${PHP_CHILDREN:-8}
ARMOR=${ARMOR:-false}   # Shellac's cache.deception_armor (see its config below)
ONLY=${ONLY:-static6k phpinfo phpcached phpcached-gzip flv flvseek}
SERVERS=${SERVERS:-shellac nginx lighttpd apache varnish ceiling}
CEILING=${CEILING:-splice1}
CEILING_STATIC=${CEILING_STATIC:-writev}
FPM=${FPM:-php-fpm8.2}
APACHE=${APACHE:-/usr/sbin/apache2}
. bench/lib.sh
need_built "$SHELLAC"
need_tools nginx lighttpd varnishd "$APACHE" "$FPM" wrk
WWW_USER=www-data
(( EUID == 0 )) || WWW_USER=$(id -un)

chmod 755 "$TMP"
W=$TMP/www
mkdir -p "$W/cached" "$TMP/php" "$TMP/ngx/fcache" "$TMP/lighttpd" "$TMP/apache"
head -c 6451 /dev/urandom >"$W/file6k.png"
echo '<?php phpinfo();' >"$W/info.php"
cp "$W/info.php" "$W/cached/info.php"
# An FLV file: its 9-byte header and the first PreviousTagSize, then 21 MiB of data.
{ printf 'FLV\x01\x05\x00\x00\x00\x09\x00\x00\x00\x00'; head -c $((22020096 - 13)) /dev/urandom; } >"$W/video.flv"
touch -d '2022-01-01 00:00:00' "$W"/*.* "$W"/cached/*
chmod -R a+rX "$W"; chown -R "$WWW_USER" "$TMP/ngx" "$TMP/lighttpd" 2>/dev/null || true
SEEK=11010048
P_FPM=$(free_port); P_SHELLAC=$(free_port); P_SADMIN=$(free_port); P_NGX=$(free_port)
P_LIGHTTPD=$(free_port); P_APACHE=$(free_port)

# --- PHP-FPM: one pool for everyone.
start_php_fpm "$TMP/php" "$P_FPM" "$PHP_CHILDREN" "$FPM"

# --- Shellac.
ab2009_shellac_config "$TMP/shellac.toml" "$P_SHELLAC" "$P_SADMIN" "$W" "$P_FPM" "$PHP_CHILDREN" "$ARMOR"
taskset -c 0 "$SHELLAC" serve --config "$TMP/shellac.toml" 2>"$TMP/shellac.err" &
SPID=$!
PIDS+=("$SPID")

# --- nginx 1.22: Debian's stock http settings plus what the issue names.
cat >"$TMP/ngx/nginx.conf" <<CONF
daemon off;
worker_processes 1;
pid $TMP/ngx/nginx.pid;
error_log $TMP/ngx/error.log;
events { worker_connections 4096; }
http {
  include /etc/nginx/mime.types;
  default_type application/octet-stream;
  access_log off;
  sendfile on; tcp_nopush on; tcp_nodelay on;
  keepalive_requests 1000000;
  open_file_cache max=1000 inactive=60s;
  open_file_cache_valid 60s;
  client_body_temp_path $TMP/ngx; proxy_temp_path $TMP/ngx; fastcgi_temp_path $TMP/ngx;
  uwsgi_temp_path $TMP/ngx; scgi_temp_path $TMP/ngx;
  fastcgi_cache_path $TMP/ngx/fcache levels=1:2 keys_zone=php:10m inactive=60m use_temp_path=off;
  # keepalive = the pool's children; its idle connections (each holding a PHP child) are
  # closed after 2 s so the servers measured after nginx get the pool's children back.
  upstream php { server 127.0.0.1:$P_FPM; keepalive $PHP_CHILDREN; keepalive_timeout 2s; }
  server {
    listen 127.0.0.1:$P_NGX;
    root $W;
    location ~ \.flv\$ { flv; }
    location ^~ /cached/ {
      fastcgi_pass php; fastcgi_keep_conn on; include /etc/nginx/fastcgi_params;
      fastcgi_param SCRIPT_FILENAME \$document_root\$fastcgi_script_name;
      fastcgi_cache php; fastcgi_cache_key \$request_uri; fastcgi_cache_valid 200 1h;
    }
    location ~ \.php\$ {
      fastcgi_pass php; fastcgi_keep_conn on; include /etc/nginx/fastcgi_params;
      fastcgi_param SCRIPT_FILENAME \$document_root\$fastcgi_script_name;
    }
  }
}
CONF
taskset -c 0 nginx -p "$TMP/ngx" -c "$TMP/ngx/nginx.conf" 2>"$TMP/ngx/stderr" &
NPID=$!
PIDS+=("$NPID")

# --- lighttpd: Debian's shipped configuration with this run's root, port and paths, plus
# mod_fastcgi and mod_flv_streaming if this build has it (bench/lib.sh start_lighttpd).
start_lighttpd "$TMP/lighttpd" "$P_LIGHTTPD" "$W" "$P_FPM" 1

# --- Apache 2.4, event MPM (Debian's mpm_event.conf numbers), PHP through proxy_fcgi.
M=/usr/lib/apache2/modules
cat >"$TMP/apache/httpd.conf" <<CONF
ServerRoot "$TMP/apache"
ServerName 127.0.0.1
Listen 127.0.0.1:$P_APACHE
PidFile "$TMP/apache/httpd.pid"
ErrorLog "$TMP/apache/error.log"
LogLevel warn
User $WWW_USER
Group $WWW_USER
LoadModule mpm_event_module $M/mod_mpm_event.so
LoadModule authz_core_module $M/mod_authz_core.so
LoadModule mime_module $M/mod_mime.so
LoadModule dir_module $M/mod_dir.so
LoadModule proxy_module $M/mod_proxy.so
LoadModule proxy_fcgi_module $M/mod_proxy_fcgi.so
StartServers 2
MinSpareThreads 25
MaxSpareThreads 75
ThreadLimit 64
ThreadsPerChild 25
MaxRequestWorkers 150
MaxConnectionsPerChild 0
KeepAlive On
MaxKeepAliveRequests 0
KeepAliveTimeout 5
EnableSendfile On
TypesConfig /etc/mime.types
DocumentRoot "$W"
<Directory "$W">
  Require all granted
</Directory>
<FilesMatch "\.php\$">
  SetHandler "proxy:fcgi://127.0.0.1:$P_FPM"
</FilesMatch>
CONF
taskset -c 0 "$APACHE" -f "$TMP/apache/httpd.conf" -DFOREGROUND 2>"$TMP/apache/stderr" &
APID=$!
PIDS+=("$APID")

# --- Varnish in front of that Apache: PHP passed except /cached/, everything else cached.
start_varnish -p default_ttl=3600 <<VCL
vcl 4.1;
backend apache { .host = "127.0.0.1"; .port = "$P_APACHE"; }
sub vcl_recv {
  if (req.url ~ "\.php" && req.url !~ "^/cached/") { return (pass); }
}
sub vcl_backend_response {
  if (bereq.url ~ "^/cached/") { set beresp.ttl = 1h; }
}
VCL

declare -A PORT=([shellac]=$P_SHELLAC [nginx]=$P_NGX [lighttpd]=$P_LIGHTTPD [apache]=$P_APACHE [varnish]=$P_VARNISH)
declare -A TREE=([shellac]=$SPID [nginx]=$NPID [lighttpd]=$LPID [apache]=$APID [varnish]="$VPID $APID")
for s in $SERVERS; do [[ $s == ceiling ]] || wait_http "http://127.0.0.1:${PORT[$s]}/file6k.png"; done

# What each server answers, checked once (and warmed: caches filled).
check() {  # check SERVER PATH EXPECTED_STATUS MIN_BYTES [EXACT_BYTES]
  local out code size
  for _ in 1 2 3; do out=$(curl -s -o /dev/null -w '%{http_code} %{size_download}' "http://127.0.0.1:${PORT[$1]}$2"); done
  read -r code size <<<"$out"
  if [[ $code != "$3" ]] || (( size < $4 )) || [[ -n ${5:-} && $size != "$5" ]]; then
    echo "$1 $2: status $code, $size bytes (expected $3, ${5:-at least $4} bytes)" >&2
    return 1
  fi
}
declare -A SKIP=()
for s in $SERVERS; do
  if [[ $s == ceiling ]]; then
    for w in phpinfo phpcached-gzip flv flvseek; do SKIP[$s-$w]=1; done
    continue
  fi
  check "$s" /file6k.png 200 6451 6451
  check "$s" /info.php 200 20000
  check "$s" /video.flv 200 22020096 22020096
  if [[ $s == shellac || $s == nginx || $s == varnish ]]; then
    check "$s" /cached/info.php 200 20000
  else
    SKIP[$s-phpcached]=1; SKIP[$s-phpcached-gzip]=1
  fi
  if [[ $s == shellac || $s == nginx || ( $s == lighttpd && $LIGHTTPD_FLV == 1 ) ]]; then
    check "$s" "/video.flv?start=$SEEK" 200 $((22020096 - SEEK + 13)) $((22020096 - SEEK + 13))
  else
    SKIP[$s-flvseek]=1
  fi
done
echo "shellac: /file6k.png $(curl -s -D - -o /dev/null "http://127.0.0.1:$P_SHELLAC/file6k.png" | grep -i '^cache-status' | tr -d '\r');" \
  "/cached/info.php $(curl -s -D - -o /dev/null "http://127.0.0.1:$P_SHELLAC/cached/info.php" | grep -i '^cache-status' | tr -d '\r');" \
  "/info.php $(curl -s -D - -o /dev/null "http://127.0.0.1:$P_SHELLAC/info.php" | grep -i '^cache-status' | tr -d '\r')"
echo "nginx fastcgi_cache: $(find "$TMP/ngx/fcache" -type f | wc -l) file(s) stored"
if [[ " $SERVERS " == *" ceiling "* ]]; then
  # The ceiling sends Shellac's answer for each row's URL, as captured here: one process for
  # the page (identity), one for the 6.3 KB file (its port and tree under ceiling-static6k).
  need_tools cc
  cc -O2 -o "$TMP/ceiling" bench/ceiling.c
  start_ceiling() {  # start_ceiling KEY MODE PATH
    curl -s -i "http://127.0.0.1:$P_SHELLAC$3" >"$TMP/$1.http"
    PORT[$1]=$(free_port)
    taskset -c 0 "$TMP/ceiling" "$2" "${PORT[$1]}" "$TMP/$1.http" 2>"$TMP/$1.err" &
    TREE[$1]=$!
    PIDS+=("${TREE[$1]}")
    wait_http "http://127.0.0.1:${PORT[$1]}$3"
    echo "$1 ($2): $(wc -c <"$TMP/$1.http") bytes a response, for $3"
  }
  start_ceiling ceiling "$CEILING" /cached/info.php
  start_ceiling ceiling-static6k "$CEILING_STATIC" /file6k.png
fi
# What each server sends for the 6.3 KB file, and where it runs: the same body bytes (compared
# with the file), the connection kept for a second request (curl's new connections: 1, then 0),
# the head's size and fields; every process of its tree (workers, threads' process) on CPU 0.
for s in $SERVERS; do
  [[ $s == ceiling ]] && continue   # it sends only the phpcached page
  url="http://127.0.0.1:${PORT[$s]}/file6k.png"
  conns=$(curl -s -o /dev/null -o /dev/null -w '%{num_connects} ' "$url" "$url")
  curl -s -D "$TMP/head-$s.txt" -o "$TMP/body-$s.bin" "$url"
  same=no; cmp -s "$TMP/body-$s.bin" "$W/file6k.png" && same=yes
  cpus=$(for p in $(tree_pids ${TREE[$s]}); do taskset -cp "$p" 2>/dev/null | awk '{print $NF}'; done | sort -u | tr '\n' ' ')
  echo "$s static6k: $(head -1 "$TMP/head-$s.txt" | tr -d '\r'), head $(wc -c <"$TMP/head-$s.txt") B," \
    "body $(wc -c <"$TMP/body-$s.bin") B identical to the file: $same; new connections for 2 requests: $conns;" \
    "CPUs of its processes: $cpus; fields: $(tail -n +2 "$TMP/head-$s.txt" | cut -d: -f1 | tr -d '\r' | tr '\n' ' ')"
  [[ $same == yes && $conns == "1 0 " && $cpus == "0 " ]] || { echo "$s: not comparable (above)" >&2; exit 1; }
done
(( LIGHTTPD_FLV == 1 )) || echo "lighttpd: mod_flv_streaming does not load in this build: no seek row"

declare -A URL=([static6k]=/file6k.png [phpinfo]=/info.php [phpcached]=/cached/info.php
  [phpcached-gzip]=/cached/info.php [flv]=/video.flv [flvseek]="/video.flv?start=$SEEK")
declare -A CONN=([static6k]=50 [phpinfo]=50 [phpcached]=50 [phpcached-gzip]=50 [flv]=10 [flvseek]=10)
wrk_args() { if [[ $1 == *-gzip ]]; then WRK_ARGS=(-H 'Accept-Encoding: gzip'); else WRK_ARGS=(); fi; }
WRK_ARGS=()
port() { echo "${PORT[$1-$2]:-${PORT[$1]}}"; }  # a server's port for a workload (the ceiling's per row)
tree() {  # the process trees whose CPU a workload costs on a server
  local t=${TREE[$1-$2]:-${TREE[$1]}}
  [[ $2 == php* ]] && t="$t $FPID"
  echo "$t"
}
SECS_MAIN=$SECS; SECS=1
for w in $ONLY; do for s in $SERVERS; do
  [[ -n ${SKIP[$s-$w]:-} ]] && continue
  wrk_args "$w"
  measure "warm-$w" "$s" 0 "http://127.0.0.1:$(port "$s" "$w")${URL[$w]}" "${CONN[$w]}" $(tree "$s" "$w")
  [[ $w == php* && $s == nginx ]] && sleep 3
done; done
SECS=$SECS_MAIN
awk '$8 != 0 {print "warm-up errors: " $0}' "$TMP/results.tsv" >&2
: >"$TMP/results.tsv"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
read -ra ALL <<<"$SERVERS"
for r in $(seq "$ROUNDS"); do
  # This round's order: the list rotated by r - 1 (no server is always measured first).
  k=$(( (r - 1) % ${#ALL[@]} ))
  ORDER=("${ALL[@]:k}" "${ALL[@]:0:k}")
  for w in $ONLY; do for s in "${ORDER[@]}"; do
    [[ -n ${SKIP[$s-$w]:-} ]] && continue
    wrk_args "$w"
    measure "$w" "$s" "$r" "http://127.0.0.1:$(port "$s" "$w")${URL[$w]}" "${CONN[$w]}" $(tree "$s" "$w")
    [[ $w == php* && $s == nginx ]] && sleep 3   # its kept PHP connections closed (above)
  done; done
  echo "round $r done, load $(cut -d' ' -f1 /proc/loadavg)"
done
echo "$ROUNDS rounds of ${SECS}s each; PHP-FPM pm=static, $PHP_CHILDREN children; load after: $(cut -d' ' -f1-3 /proc/loadavg)"
summarize shellac
curl -s "http://127.0.0.1:$P_SADMIN/stats" >"$TMP/shellac-stats.json" || true
