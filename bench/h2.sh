#!/usr/bin/env bash
# HTTP/2 side by side (issue 20): Shellac vs nginx (proxy_cache, `listen ... http2`), both on
# CPU 0 with one worker, in front of bench/origin.rs, cleartext HTTP/2 with prior knowledge
# (h2c); with TLS=1 HTTP/2 over TLS instead (ALPN h2, one ECDSA P-256 certificate for both,
# TLS 1.3: Shellac's [[tls]] listener, nginx's `listen ... ssl http2`).
#
#   1. Hit throughput: h2load (nghttp2-client) with C connections × M streams (default 10 × 10
#      = 100 concurrent streams), N requests for /hit6k (6.3 KB) and /small100, RUNS rounds
#      alternating the two servers; the median req/s of each and the ratio.
#   2. Memory per idle HTTP/2 connection: IDLE connections open, each having sent the preface,
#      SETTINGS and one GET answered, then silent; the server's RSS (nginx: master + worker)
#      before and with them open, per connection.
#
#   cargo build --release --bin shellac --example origin
#   bench/h2.sh                      # N=200000 RUNS=3 IDLE=2000
#   TLS=1 bench/h2.sh                # over TLS (h2load https://, ALPN h2)
#   LOAD=0 HTTP2_EXTRA='stream_window = "64KiB"' bench/h2.sh
#                                    # idle memory only, with more [http2] keys for Shellac
#   SHELLAC=path/to/other/shellac bench/h2.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
N=${N:-200000}
C=${C:-10}
M=${M:-10}
RUNS=${RUNS:-3}
IDLE=${IDLE:-2000}
TLS=${TLS:-0}
LOAD=${LOAD:-1}
HTTP2_EXTRA=${HTTP2_EXTRA:-}
SHELLAC=${SHELLAC:-target/release/shellac}
ORIGIN=${ORIGIN:-target/release/examples/origin}
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
. bench/lib.sh
need_built "$SHELLAC" "$ORIGIN"
for tool in h2load nginx curl; do
  command -v "$tool" >/dev/null || { echo "$tool missing (apt-get install nghttp2-client nginx-light curl)" >&2; exit 1; }
done
# The h2 Python package for the idle connections (Debian python3-h2 is for /usr/bin/python3).
PY=/usr/bin/python3
$PY -c 'import h2' 2>/dev/null || { echo "python3-h2 missing (apt-get install python3-h2)" >&2; exit 1; }

start_origin "$ORIGIN"

# Shellac: h2c on (or a [[tls]] listener, ALPN h2 by default), one worker thread, CPU 0.
S_EXTRA=""
N_LISTEN=http2
if (( TLS )); then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
    -subj /CN=bench.test -addext subjectAltName=DNS:bench.test \
    -keyout "$TMP/key.pem" -out "$TMP/cert.pem" 2>/dev/null
  S_TLS=$(free_port)
  S_EXTRA="
[[tls]]
listen = \"127.0.0.1:$S_TLS\"
[[tls.certificate]]
cert = \"$TMP/cert.pem\"
key = \"$TMP/key.pem\""
  N_LISTEN="ssl http2;
        ssl_certificate     $TMP/cert.pem;
        ssl_certificate_key $TMP/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3"
fi
read -r S_PORT S_ADMIN S_PID < <(start_shellac "$SHELLAC" "idle_timeout = \"600s\"
max_connections = 100000

[http2]
h2c = true
max_requests = 0
$HTTP2_EXTRA
$S_EXTRA")
PIDS+=("$S_PID")
SCHEME=http
if (( TLS )); then S_PORT=$S_TLS; SCHEME=https; fi

# nginx: one worker on CPU 0, proxy_cache honouring the origin's Cache-Control, h2c.
N_PORT=$(free_port)
mkdir -p "$TMP/nginx"
USER_LINE=""
if (( EUID == 0 )); then
  if id www-data >/dev/null 2>&1; then nu=www-data; else nu=nobody; fi
  USER_LINE="user $nu $(id -gn "$nu");"
fi
chmod 755 "$TMP"
cat >"$TMP/nginx/nginx.conf" <<EOF
$USER_LINE
worker_processes 1;
worker_cpu_affinity 1;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log warn;
worker_rlimit_nofile 100000;
events { worker_connections 100000; }
http {
    access_log off;
    tcp_nodelay on;
    keepalive_timeout 600;
    keepalive_requests 100000000;
    http2_max_requests 100000000;
    http2_max_concurrent_streams 128;
    client_body_temp_path $TMP/nginx/client_body;
    proxy_temp_path       $TMP/nginx/proxy;
    fastcgi_temp_path     $TMP/nginx/fastcgi;
    uwsgi_temp_path       $TMP/nginx/uwsgi;
    scgi_temp_path        $TMP/nginx/scgi;
    proxy_cache_path $TMP/nginx/cache levels=1:2 keys_zone=bench:10m max_size=1g inactive=60m use_temp_path=off;
    upstream origin { server 127.0.0.1:$ORIGIN_PORT; keepalive 32; }
    server {
        listen 127.0.0.1:$N_PORT $N_LISTEN;
        location / {
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_cache bench;
            add_header X-Cache-Status \$upstream_cache_status always;
        }
    }
}
EOF
taskset -c 0 nginx -c "$TMP/nginx/nginx.conf" -g 'daemon off;' 2>"$TMP/nginx/stderr" &
N_PID=$!
PIDS+=("$N_PID")

if (( TLS )); then
  h2get() { curl -sk --http2 -D - -o /dev/null "https://127.0.0.1:$1/$2"; }
else
  h2get() { curl -s --http2-prior-knowledge -D - -o /dev/null "http://127.0.0.1:$1/$2"; }
fi
for _ in $(seq 100); do
  h2get "$S_PORT" hit6k >/dev/null 2>&1 && h2get "$N_PORT" hit6k >/dev/null 2>&1 && break
  sleep 0.1
done
for path in hit6k small100; do
  for _ in 1 2 3; do h2get "$S_PORT" "$path" >/dev/null; h2get "$N_PORT" "$path" >/dev/null; done
  h2get "$S_PORT" "$path" | grep -qi '^cache-status: shellac; hit' || { echo "Shellac: /$path is no hit" >&2; exit 1; }
  h2get "$N_PORT" "$path" | grep -qi '^x-cache-status: HIT' || { echo "nginx: /$path is no hit" >&2; exit 1; }
done

echo "h2load ($SCHEME): $C connections x $M streams, $N requests per run, $RUNS runs; servers on CPU 0, h2load and origin on CPU 1"
# h2load's "finished in X, Y req/s": the req/s.
h2rate() { taskset -c 1 h2load -c"$C" -m"$M" -n"$N" "$SCHEME://127.0.0.1:$1/$2" 2>&1 | awk '/^finished in/ {gsub(",", "", $4); print $4}'; }
for path in hit6k small100; do
  (( LOAD )) || break
  s=(); n=()
  for _ in $(seq "$RUNS"); do
    s+=("$(h2rate "$S_PORT" "$path")")
    n+=("$(h2rate "$N_PORT" "$path")")
  done
  sm=$(median "${s[@]}"); nm=$(median "${n[@]}")
  printf '/%s  shellac %s req/s (%s)  nginx %s req/s (%s)  ratio %.2f\n' \
    "$path" "$sm" "${s[*]}" "$nm" "${n[*]}" "$(python3 -c "print($sm / $nm)")"
done

# Memory per idle HTTP/2 connection.
rss_tree() {  # RSS (KiB) of a process and its children
  local total=0 p
  for p in $1 $(pgrep -P "$1" || true); do
    total=$((total + $(awk '/VmRSS/ {print $2}' "/proc/$p/status")))
  done
  echo "$total"
}
idle_rss() {  # PORT PID -> "before open per_conn_kib"
  local before open
  before=$(rss_tree "$2")
  timeout 120 $PY - "$1" "$IDLE" "$TLS" >"$TMP/idle.txt" <<'PYEOF' &
import socket, ssl, sys, time
import h2.connection, h2.config, h2.events
port, n, tls = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.set_alpn_protocols(["h2"])
held = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    if tls:
        s = ctx.wrap_socket(s)
        assert s.selected_alpn_protocol() == "h2"
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    c.initiate_connection()
    c.send_headers(1, [(":method", "GET"), (":scheme", "http"), (":authority", "bench"), (":path", "/small100")], end_stream=True)
    s.sendall(c.data_to_send())
    done = False
    while not done:
        data = s.recv(65536)
        if not data:
            break
        for e in c.receive_data(data):
            if isinstance(e, h2.events.StreamEnded):
                done = True
        s.sendall(c.data_to_send())
    held.append((s, c))
print("OPEN", flush=True)
time.sleep(8)
PYEOF
  local py=$!
  for _ in $(seq 1200); do grep -q OPEN "$TMP/idle.txt" && break; sleep 0.1; done
  sleep 3  # past Shellac's idle_release and nginx's http2 idle handling
  open=$(rss_tree "$2")
  wait "$py" || true
  python3 -c "print(f'$before $open {($open - $before) / $IDLE:.2f}')"
}
read -r sb so sp < <(idle_rss "$S_PORT" "$S_PID")
read -r nb no np < <(idle_rss "$N_PORT" "$N_PID")
echo "idle HTTP/2 connections ($SCHEME): $IDLE each"
echo "  shellac rss ${sb} -> ${so} KiB: ${sp} KiB per connection"
echo "  nginx   rss ${nb} -> ${no} KiB: ${np} KiB per connection (master + worker)"
