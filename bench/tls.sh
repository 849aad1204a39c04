#!/usr/bin/env bash
# TLS side by side (issue 20): Shellac vs nginx (proxy_cache, `listen ... ssl`), both one
# worker on CPU 0, in front of bench/origin.rs, the same ECDSA P-256 certificate, TLS 1.3
# (each server's default preference), session tickets on. Load generators run on CPU 1.
#
#   1. Keep-alive hit: wrk over TLS, CONNS (50) connections, GET /hit6k (6.3 KB), SECS per
#      run, RUNS runs alternating the servers: median req/s and p99 latency of each.
#   2. Handshakes, a new connection per request: wrk with `Connection: close` (OpenSSL
#      client, no session reuse: full handshakes) for SECS, and `openssl s_time -reuse`
#      (resumed sessions). Reported: handshakes/s and the server's own CPU time per
#      handshake (user + system, from /proc): on two cores the client (which verifies an
#      ECDSA signature per handshake, dearer than making one) may be the limit, so CPU per
#      handshake is the comparison that holds; "ratio" is nginx's CPU over Shellac's.
#      QUOTA=P caps each server at P% of one CPU (a cgroup, `cpu` controller, v1 or v2) for
#      the handshake runs (and PAR=N runs N `s_time -reuse` at once, so resumed sessions are
#      not one at a time), so the server rather than the client is the limit and handshakes/s
#      compare the two at the same CPU budget; with P small enough that neither server
#      reaches the client's own rate, the handshakes/s ratio is the servers' ratio.
#   3. Memory per idle TLS connection: IDLE connections, each after a handshake and one
#      answered GET, then silent; the server's RSS (nginx: master + worker) before and with
#      them open, after Shellac's idle_release (1 s), per connection.
#
#   cargo build --release --bins --examples
#   bench/tls.sh                     # SECS=8 RUNS=3 CONNS=50 IDLE=2000
#   SHELLAC=path/to/other/shellac bench/tls.sh
#   QUOTA=10 PHASES=handshakes bench/tls.sh   # handshakes only, each server capped at 10% of a CPU
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
SECS=${SECS:-8}
RUNS=${RUNS:-3}
CONNS=${CONNS:-50}
IDLE=${IDLE:-2000}
QUOTA=${QUOTA:-}
PHASES=${PHASES:-hit handshakes idle}
PAR=${PAR:-1}
SHELLAC=${SHELLAC:-target/release/shellac}
ORIGIN=${ORIGIN:-target/release/examples/origin}
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
. bench/lib.sh
need_built "$SHELLAC" "$ORIGIN"
for tool in wrk nginx curl openssl; do
  command -v "$tool" >/dev/null || { echo "$tool missing (apt-get install wrk nginx-light curl openssl)" >&2; exit 1; }
done

start_origin "$ORIGIN"

# One ECDSA P-256 certificate for both.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
  -subj /CN=bench.test -addext subjectAltName=DNS:bench.test \
  -keyout "$TMP/key.pem" -out "$TMP/cert.pem" 2>/dev/null

# Shellac: one worker thread on CPU 0, a [[tls]] listener.
S_TLS=$(free_port)
read -r S_PORT S_ADMIN S_PID < <(start_shellac "$SHELLAC" "idle_timeout = \"600s\"
max_connections = 100000

[[tls]]
listen = \"127.0.0.1:$S_TLS\"
alpn = \"http/1.1\"
[[tls.certificate]]
cert = \"$TMP/cert.pem\"
key = \"$TMP/key.pem\"")
PIDS+=("$S_PID")

# nginx: one worker on CPU 0, proxy_cache honouring the origin's Cache-Control, TLS.
N_PORT=$(free_port)
mkdir -p "$TMP/nginx"
USER_LINE=""
if (( EUID == 0 )); then
  if id www-data >/dev/null 2>&1; then nu=www-data; else nu=nobody; fi
  USER_LINE="user $nu $(id -gn "$nu");"
fi
chmod 755 "$TMP"
chmod 644 "$TMP/key.pem"
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
    client_body_temp_path $TMP/nginx/client_body;
    proxy_temp_path       $TMP/nginx/proxy;
    fastcgi_temp_path     $TMP/nginx/fastcgi;
    uwsgi_temp_path       $TMP/nginx/uwsgi;
    scgi_temp_path        $TMP/nginx/scgi;
    proxy_cache_path $TMP/nginx/cache levels=1:2 keys_zone=bench:10m max_size=1g inactive=60m use_temp_path=off;
    upstream origin { server 127.0.0.1:$ORIGIN_PORT; keepalive 32; }
    server {
        listen 127.0.0.1:$N_PORT ssl;
        ssl_certificate     $TMP/cert.pem;
        ssl_certificate_key $TMP/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_cache shared:SSL:10m;
        ssl_session_tickets on;
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
worker() { pgrep -P "$N_PID" | head -n1; }

sget() { curl -sk -D - -o /dev/null "https://127.0.0.1:$1/$2"; }
for _ in $(seq 100); do
  sget "$S_TLS" hit6k >/dev/null 2>&1 && sget "$N_PORT" hit6k >/dev/null 2>&1 && break
  sleep 0.1
done
for _ in 1 2 3; do sget "$S_TLS" hit6k >/dev/null; sget "$N_PORT" hit6k >/dev/null; done
sget "$S_TLS" hit6k | grep -qi '^cache-status: shellac; hit' || { echo "Shellac: /hit6k is no hit" >&2; exit 1; }
sget "$N_PORT" hit6k | grep -qi '^x-cache-status: HIT' || { echo "nginx: /hit6k is no hit" >&2; exit 1; }
for port in "$S_TLS" "$N_PORT"; do
  echo | openssl s_client -connect "127.0.0.1:$port" 2>/dev/null | grep -m1 '^New,' || true
done
echo "ECDSA P-256; servers on CPU 0 (one worker), clients and origin on CPU 1"

# wrk over TLS: "req/s p99_ms" (p99 in ms from --latency).
wrk_tls() {  # PORT CONNS [HEADER]
  local out
  out=$(timeout $((SECS + 30)) taskset -c 1 wrk -t1 -c"$2" -d"${SECS}s" --latency ${3:+-H "$3"} "https://127.0.0.1:$1/hit6k" 2>&1)
  local rps p99
  rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
  p99=$(awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub("us","",v); v/=1000} else if (v ~ /ms$/) {sub("ms","",v)} else if (v ~ /s$/) {sub("s","",v); v*=1000}; print v}' <<<"$out")
  echo "$rps ${p99:-0}"
}

phase() { [[ " $PHASES " == *" $1 "* ]]; }

# CPU caps for the handshake runs (QUOTA): one cgroup per server, removed on exit.
CGROUPS=()
cap_cpu() {  # NAME PERCENT PID...
  local name=$1 pct=$2 dir
  shift 2
  if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
    dir=/sys/fs/cgroup/$name
    mkdir -p "$dir" 2>/dev/null && echo "$((pct * 200)) 20000" 2>/dev/null >"$dir/cpu.max" || return 1
  elif [[ -d /sys/fs/cgroup/cpu ]]; then
    dir=/sys/fs/cgroup/cpu/$name
    mkdir -p "$dir" 2>/dev/null || return 1
    echo 20000 2>/dev/null >"$dir/cpu.cfs_period_us" || return 1
    echo $((pct * 200)) >"$dir/cpu.cfs_quota_us"
  else
    return 1
  fi
  CGROUPS+=("$dir")
  local p
  for p in "$@"; do echo "$p" >"$dir/cgroup.procs"; done
}
uncap_all() {
  local dir root p
  for dir in "${CGROUPS[@]}"; do
    root=$(dirname "$dir")
    while read -r p; do echo "$p" >"$root/cgroup.procs" 2>/dev/null || true; done <"$dir/cgroup.procs"
    rmdir "$dir" 2>/dev/null || true
  done
  CGROUPS=()
}
trap 'uncap_all; cleanup' EXIT

if phase hit; then
echo "== keep-alive hit, /hit6k, $CONNS connections, ${SECS}s x $RUNS =="
sr=(); sp=(); nr=(); np=()
for _ in $(seq "$RUNS"); do
  read -r r p < <(wrk_tls "$S_TLS" "$CONNS"); sr+=("$r"); sp+=("$p")
  read -r r p < <(wrk_tls "$N_PORT" "$CONNS"); nr+=("$r"); np+=("$p")
done
srm=$(median "${sr[@]}"); nrm=$(median "${nr[@]}"); spm=$(median "${sp[@]}"); npm=$(median "${np[@]}")
printf 'shellac %s req/s p99 %s ms (%s)\nnginx   %s req/s p99 %s ms (%s)\nratio req/s %.2f, p99 shellac/nginx %.2f\n' \
  "$srm" "$spm" "${sr[*]}" "$nrm" "$npm" "${nr[*]}" "$(python3 -c "print($srm / $nrm)")" "$(python3 -c "print($spm / max($npm, 1e-9))")"
fi

# Handshakes: wrk with Connection: close (full) and s_time -reuse (resumed), measuring the
# server's CPU. Prints "handshakes/s cpu_us_per_handshake".
full_hs() {  # PORT PID
  local t0 t1 out rps n
  t0=$(cpu_ticks "$2")
  out=$(timeout $((SECS + 30)) taskset -c 1 wrk -t1 -c"$CONNS" -d"${SECS}s" -H "Connection: close" "https://127.0.0.1:$1/small100" 2>&1)
  t1=$(cpu_ticks "$2")
  rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
  n=$(awk '/requests in/ {print $1}' <<<"$out")
  python3 -c "print(f'$rps {($t1 - $t0) * 1e6 / $(getconf CLK_TCK) / max($n, 1):.0f}')"
}
resumed_hs() {  # PORT PID
  local t0 t1 i n secs
  local clients=()
  t0=$(cpu_ticks "$2")
  for i in $(seq "$PAR"); do
    timeout $((SECS + 30)) taskset -c 1 openssl s_time -connect "127.0.0.1:$1" -reuse -time "$SECS" -www /small100 >"$TMP/s_time.$i" 2>&1 &
    clients+=($!)
  done
  wait "${clients[@]}" || true
  t1=$(cpu_ticks "$2")
  # "N connections in T real seconds" (each process's last such line: its reuse run), summed.
  read -r n secs < <(for i in $(seq "$PAR"); do awk '/connections in .* real seconds/ {n=$1; s=$4} END {print n, s}' "$TMP/s_time.$i"; done \
    | awk '{n += $1; if ($2 > s) s = $2} END {print n + 0, s + 0}')
  python3 -c "print(f'{$n / max($secs, 1e-9):.0f} {($t1 - $t0) * 1e6 / $(getconf CLK_TCK) / max($n, 1):.0f}')"
}
if phase handshakes; then
if [[ -n "$QUOTA" ]]; then
  if cap_cpu "shellac-bench-$$-s" "$QUOTA" "$S_PID" \
    && cap_cpu "shellac-bench-$$-n" "$QUOTA" "$N_PID" $(pgrep -P "$N_PID"); then
    echo "== each server capped at $QUOTA% of one CPU for the handshake runs =="
  else
    uncap_all
    echo "== QUOTA=$QUOTA needs root and the cgroup cpu controller (v1 or v2): handshakes run uncapped =="
  fi
fi
echo "== TLS handshakes, a new connection per request, ${SECS}s x $RUNS (resumed: $PAR clients at once) =="
for kind in full resumed; do
  sh=(); sc=(); nh=(); nc=()
  for _ in $(seq "$RUNS"); do
    read -r h c < <("${kind}_hs" "$S_TLS" "$S_PID"); sh+=("$h"); sc+=("$c")
    read -r h c < <("${kind}_hs" "$N_PORT" "$(worker)"); nh+=("$h"); nc+=("$c")
  done
  shm=$(median "${sh[@]}"); scm=$(median "${sc[@]}"); nhm=$(median "${nh[@]}"); ncm=$(median "${nc[@]}")
  printf '%-8s shellac %s handshakes/s, %s us CPU each | nginx %s handshakes/s, %s us CPU each | handshakes/s ratio %.2f, per-CPU ratio %.2f\n' \
    "$kind" "$shm" "$scm" "$nhm" "$ncm" "$(python3 -c "print($shm / max($nhm, 1e-9))")" "$(python3 -c "print($ncm / max($scm, 1e-9))")"
done
uncap_all
fi

# Memory per idle TLS connection.
rss_tree() {
  local total=0 p
  for p in $1 $(pgrep -P "$1" || true); do
    total=$((total + $(awk '/VmRSS/ {print $2}' "/proc/$p/status")))
  done
  echo "$total"
}
idle_rss() {  # PORT PID -> "before open per_conn_kib"
  local before open
  before=$(rss_tree "$2")
  timeout 300 python3 - "$1" "$IDLE" >"$TMP/idle.txt" <<'PYEOF' &
import socket, ssl, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
held = []
for i in range(n):
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="bench.test")
    s.sendall(b"GET /small100 HTTP/1.1\r\nHost: bench.test\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < 100:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    held.append(s)
print("OPEN", flush=True)
time.sleep(10)
PYEOF
  local py=$!
  for _ in $(seq 3000); do grep -q OPEN "$TMP/idle.txt" && break; sleep 0.1; done
  sleep 3  # past Shellac's idle_release (1 s) and its trim
  open=$(rss_tree "$2")
  wait "$py" || true
  python3 -c "print(f'$before $open {($open - $before) / $IDLE:.2f}')"
}
if phase idle; then
read -r sb so sp < <(idle_rss "$S_TLS" "$S_PID")
read -r nb no np < <(idle_rss "$N_PORT" "$N_PID")
echo "== idle TLS connections: $IDLE each =="
echo "shellac rss ${sb} -> ${so} KiB: ${sp} KiB per connection"
echo "nginx   rss ${nb} -> ${no} KiB: ${np} KiB per connection (master + worker)"
fi
