#!/usr/bin/env bash
# Issue 29's compression goals, side by side in one run: a 72 KiB HTML page (bench/page72k.py)
# hit by a gzip client — Shellac (gzips once at fetch, stores the gzip) against nginx with
# `gzip on` (compresses per request; the page is a static file of its root, the cheapest nginx
# can do) and Varnish (`beresp.do_gzip`, stores the gzip); then hit by an identity client from
# the gzip-stored object (Shellac and Varnish decode per request; nginx's plain file is shown
# for scale). Goals per CPU-second: gzip >= 3x nginx and >= 1.2x Varnish; identity >= Varnish.
# Every server runs on CPU 0, one at a time under `wrk -t1` on CPU 1; ROUNDS rounds alternate
# them so the machine's drift falls on all alike. An nginx origin (gzip off, `expires 1h`) on
# CPU 1 serves the page to Shellac and Varnish.
#
#   cargo build --release && bench/prio.sh bench/compression.sh   # ROUNDS=5 SECS=5 CONNS=50
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SHELLAC=${SHELLAC:-target/release/shellac}
ROUNDS=${ROUNDS:-5}
SECS=${SECS:-5}
CONNS=${CONNS:-50}
. bench/lib.sh
need_built "$SHELLAC"
need_tools nginx varnishd wrk

chmod 755 "$TMP"
mkdir -p "$TMP/www" "$TMP/origin" "$TMP/ngx"
python3 bench/page72k.py "$TMP/www/page.html"
touch -d '2022-01-01 00:00:00' "$TMP/www/page.html"
chmod -R a+rX "$TMP/www"
P_ORIGIN=$(free_port); P_NGX=$(free_port)

# nginx_conf DIR PORT EXTRA: an nginx serving $TMP/www, one worker, no access log.
nginx_conf() {
  cat >"$1/nginx.conf" <<NGX
daemon off;
worker_processes 1;
pid $1/nginx.pid;
error_log $1/error.log;
events { worker_connections 4096; }
http {
  include /etc/nginx/mime.types;
  access_log off;
  sendfile on; tcp_nopush on; tcp_nodelay on;
  keepalive_requests 1000000;
  open_file_cache max=1000 inactive=60s;
  client_body_temp_path $1; proxy_temp_path $1; fastcgi_temp_path $1; uwsgi_temp_path $1; scgi_temp_path $1;
  server { listen 127.0.0.1:$2; root $TMP/www; $3 }
}
NGX
}
nginx_conf "$TMP/origin" "$P_ORIGIN" "expires 1h;"
taskset -c 1 nginx -p "$TMP/origin" -c "$TMP/origin/nginx.conf" 2>"$TMP/origin/stderr" &
PIDS+=($!)
# nginx's documented `gzip on` (its defaults otherwise: level 1, text/html); `gzip_vary` as
# Debian's stock config suggests.
nginx_conf "$TMP/ngx" "$P_NGX" "gzip on; gzip_vary on;"
taskset -c 0 nginx -p "$TMP/ngx" -c "$TMP/ngx/nginx.conf" 2>"$TMP/ngx/stderr" &
NPID=$!
PIDS+=("$NPID")

start_varnish <<VCL
vcl 4.1;
backend origin { .host = "127.0.0.1"; .port = "$P_ORIGIN"; }
sub vcl_backend_response {
  if (beresp.http.Content-Type ~ "^text/") { set beresp.do_gzip = true; }
}
VCL

ORIGIN_PORT=$P_ORIGIN
read -r P_SHELLAC _ SPID < <(start_shellac "$SHELLAC" '
[cache]
memory_size = "256MiB"')
PIDS+=("$SPID")
for p in "$P_ORIGIN" "$P_NGX" "$P_VARNISH" "$P_SHELLAC"; do wait_http "http://127.0.0.1:$p/page.html"; done

# What each server sends each client (bytes, coding) — printed, and checked.
check() {  # check NAME PORT
  local gz id
  gz=$(curl -s -H 'Accept-Encoding: gzip' -o "$TMP/body.gz" -w '%{size_download}' "http://127.0.0.1:$2/page.html")
  gunzip -c "$TMP/body.gz" | cmp -s - "$TMP/www/page.html" || { echo "$1: the gzip body is not the page" >&2; exit 1; }
  id=$(curl -s -o "$TMP/body.id" -w '%{size_download}' "http://127.0.0.1:$2/page.html")
  cmp -s "$TMP/body.id" "$TMP/www/page.html" || { echo "$1: the identity body is not the page" >&2; exit 1; }
  echo "$1: gzip client gets $gz bytes, identity client $id bytes; $(curl -s -D - -o /dev/null -H 'Accept-Encoding: gzip' "http://127.0.0.1:$2/page.html" | grep -iE '^(cache-status|x-varnish|age):' | tr -d '\r' | tr '\n' ' ')"
}
for _ in 1 2 3; do for p in "$P_VARNISH" "$P_SHELLAC"; do curl -s -o /dev/null -H 'Accept-Encoding: gzip' "http://127.0.0.1:$p/page.html"; done; done
wait_for_hit "$P_SHELLAC" page.html
check nginx "$P_NGX"; check varnish "$P_VARNISH"; check shellac "$P_SHELLAC"
VCHILD=$(pgrep -P "$VPID" | head -n1)

# Warm-up: 2 s of each.
SECS_MAIN=$SECS; SECS=2
WRK_ARGS=(-H 'Accept-Encoding: gzip')
for s in shellac:$P_SHELLAC:$SPID nginx:$P_NGX:$NPID varnish:$P_VARNISH:$VPID; do
  IFS=: read -r name port pid <<<"$s"; measure warm "$name" 0 "http://127.0.0.1:$port/page.html" "$CONNS" "$pid"
done
: >"$TMP/results.tsv"
SECS=$SECS_MAIN
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
  WRK_ARGS=(-H 'Accept-Encoding: gzip')
  measure "gzip-client" shellac "$r" "http://127.0.0.1:$P_SHELLAC/page.html" "$CONNS" "$SPID"
  measure "gzip-client" nginx "$r" "http://127.0.0.1:$P_NGX/page.html" "$CONNS" "$NPID"
  measure "gzip-client" varnish "$r" "http://127.0.0.1:$P_VARNISH/page.html" "$CONNS" "$VPID"
  WRK_ARGS=()
  measure "identity-client" shellac "$r" "http://127.0.0.1:$P_SHELLAC/page.html" "$CONNS" "$SPID"
  measure "identity-client" varnish "$r" "http://127.0.0.1:$P_VARNISH/page.html" "$CONNS" "$VPID"
  measure "identity-client" nginx-plain-file "$r" "http://127.0.0.1:$P_NGX/page.html" "$CONNS" "$NPID"
  echo "round $r done, load $(cut -d' ' -f1 /proc/loadavg)"
done
echo "varnish child $VCHILD; $ROUNDS rounds of ${SECS}s, $CONNS connections, 72 KiB page; load after: $(cut -d' ' -f1-3 /proc/loadavg)"
summarize shellac
