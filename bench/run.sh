#!/usr/bin/env bash
# Side-by-side loopback benchmark: Shellac vs nginx (proxy_cache) vs Varnish
# (malloc storage) vs a reference server, all in front of the same origin
# (bench/origin.rs), driven by wrk and bench/clients.rs (issue 8's workloads 1-8).
#
#   bench/run.sh                       # DURATION=10s RUNS=3
#   DURATION=3 RUNS=1 bench/run.sh     # quick smoke run
#   SHELLAC=/path/to/shellac bench/run.sh
#   ONLY="big21m" bench/run.sh         # just these wrk workloads (no 4, 6, 7, 8, HTTP/2, TLS)
#
# See bench/README.md. Every server runs from its own config in a private temp
# dir, on its own loopback port, and is stopped by PID on exit (also on
# Ctrl-C or failure). Results: stdout and bench/last-run.txt.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
cd "$REPO_ROOT"
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

DURATION=${DURATION:-10s}
RUNS=${RUNS:-3}
SHELLAC=${SHELLAC:-target/release/shellac}
REFERENCE=${REFERENCE:-target/release/examples/reference}
ORIGIN=${ORIGIN:-target/release/examples/origin}
CLIENTS=${CLIENTS:-target/release/examples/clients}
MISS_KEYS=${MISS_KEYS:-100000}     # workload 4: distinct keys per run
BURST=${BURST:-1000}               # workload 6: simultaneous requests for one cold key
IDLE_CONNS=${IDLE_CONNS:-10000}    # workload 7: idle keep-alive connections
OBJECTS=${OBJECTS:-1000000}        # workload 8: small objects cached
WARMUP_S=2
SERVER_CPU=0   # proxies under test
LOAD_CPU=1     # wrk + origin

log()  { printf '[bench] %s\n' "$*" >&2; }
warn() { printf '[bench] WARNING: %s\n' "$*" >&2; WARNINGS+=("$*"); }
die()  { printf '[bench] ERROR: %s\n' "$*" >&2; exit 1; }
WARNINGS=()
# Workload 7 holds 10,000 connections: every process started here inherits this limit.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

[[ $DURATION =~ ^([0-9]+)s?$ ]] || die "DURATION must be whole seconds, e.g. 10 or 10s (got '$DURATION')"
DUR_S=${BASH_REMATCH[1]}
(( DUR_S >= 1 )) || die "DURATION must be >= 1s"
[[ $RUNS =~ ^[0-9]+$ ]] && (( RUNS >= 1 )) || die "RUNS must be a positive integer (got '$RUNS')"
for tool in "$ORIGIN" "$CLIENTS"; do
  [[ -x $tool ]] || die "$tool not found: cargo build --release --bins --examples"
done
(( $(ulimit -n) >= IDLE_CONNS + 1000 )) \
  || die "open-file limit $(ulimit -n) is below IDLE_CONNS + 1000; lower IDLE_CONNS or raise the hard limit"

# --------------------------------------------------------------------------
# Tools
# --------------------------------------------------------------------------
need_pkgs=()
command -v nginx    >/dev/null 2>&1 || need_pkgs+=(nginx)
command -v varnishd >/dev/null 2>&1 || need_pkgs+=(varnish)
command -v wrk      >/dev/null 2>&1 || need_pkgs+=(wrk)
command -v curl     >/dev/null 2>&1 || need_pkgs+=(curl)
command -v python3  >/dev/null 2>&1 || need_pkgs+=(python3)
command -v taskset  >/dev/null 2>&1 || need_pkgs+=(util-linux)
if (( ${#need_pkgs[@]} )); then
  (( EUID == 0 )) || die "missing tools (${need_pkgs[*]}); run as root or: sudo apt-get install -y ${need_pkgs[*]}"
  log "installing: ${need_pkgs[*]}"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y "${need_pkgs[@]}"
  # Debian's packages start their system services on install (unless a
  # policy-rc.d forbids it). We never use those instances; stop them so they
  # don't eat CPU during the run.
  for svc in varnishncsa varnish nginx; do
    case " ${need_pkgs[*]} " in
      *" ${svc%ncsa} "*) ;;
      *) continue ;;
    esac
    if command -v service >/dev/null 2>&1; then
      service "$svc" stop >/dev/null 2>&1 || true
    fi
  done
  # No service(8)? Fall back to the pid files of the packages we just installed.
  pidfiles=()
  [[ " ${need_pkgs[*]} " == *" nginx "* ]]   && pidfiles+=(/run/nginx.pid)
  [[ " ${need_pkgs[*]} " == *" varnish "* ]] && pidfiles+=(/run/varnishd.pid /run/varnish.pid)
  for pidfile in "${pidfiles[@]}"; do
    if [[ -s $pidfile ]]; then
      pid=$(<"$pidfile")
      [[ $pid =~ ^[0-9]+$ ]] && kill "$pid" 2>/dev/null || true
    fi
  done
fi

# --------------------------------------------------------------------------
# Temp dir, process bookkeeping, cleanup
# --------------------------------------------------------------------------
T=$(mktemp -d -t shellac-bench.XXXXXX)
# Varnish's unix jail and nginx workers drop privileges: they need to traverse
# this dir and read their configs/docroot.
chmod 755 "$T"
RESULTS="$T/results.txt"
: >"$RESULTS"

declare -A PID_OF=()      # server name -> pid
declare -A LOG_OF=()      # server name -> log file
SERVER_ORDER=()

descendants() {  # pid -> all descendant pids (depth first)
  local c
  for c in $(pgrep -P "$1" 2>/dev/null || true); do
    echo "$c"
    descendants "$c"
  done
}

stop_pid() {
  local pid=$1 kids i
  kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
  kids=$(descendants "$pid")
  kill -TERM "$pid" 2>/dev/null || true
  for (( i = 0; i < 100; i++ )); do           # up to 10 s for a clean stop
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
  # Anything the master left behind (nginx workers, varnish child) by PID.
  for i in $kids; do
    kill -0 "$i" 2>/dev/null && kill -KILL "$i" 2>/dev/null || true
  done
  return 0
}

stop_server() {
  local name=$1
  [[ -n ${PID_OF[$name]:-} ]] || return 0
  stop_pid "${PID_OF[$name]}"
  unset "PID_OF[$name]"
}

cleanup() {
  local rc=$?
  set +e
  trap - EXIT INT TERM HUP
  local i name
  for (( i = ${#SERVER_ORDER[@]} - 1; i >= 0; i-- )); do
    name=${SERVER_ORDER[$i]}
    [[ -n ${PID_OF[$name]:-} ]] && stop_server "$name"
  done
  if (( rc != 0 )); then
    for name in "${SERVER_ORDER[@]}"; do
      [[ -s ${LOG_OF[$name]:-/nonexistent} ]] || continue
      printf '[bench] --- last lines of %s log (%s) ---\n' "$name" "${LOG_OF[$name]}" >&2
      tail -n 15 "${LOG_OF[$name]}" >&2
    done
  fi
  if [[ ${KEEP_TMP:-0} == 1 ]]; then
    log "keeping temp dir $T"
  else
    rm -rf "$T"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# start_server NAME PORT LOGFILE CMD...  waits until PORT answers HTTP.
# With SOFT=1 in the environment a startup failure returns 1 instead of dying.
start_server() {
  local name=$1 port=$2 logf=$3; shift 3
  local fail=die
  [[ ${SOFT:-0} == 1 ]] && fail=soft_fail
  "$@" >"$logf" 2>&1 &
  PID_OF[$name]=$!
  LOG_OF[$name]=$logf
  SERVER_ORDER+=("$name")
  local i
  for (( i = 0; i < 150; i++ )); do           # up to 15 s to come up
    if ! kill -0 "${PID_OF[$name]}" 2>/dev/null; then
      $fail "$name exited during startup; last lines of $logf:"$'\n'"$(tail -n 15 "$logf")"
      return 1
    fi
    if curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$port/"; then
      log "$name up on 127.0.0.1:$port (pid ${PID_OF[$name]})"
      return 0
    fi
    sleep 0.1
  done
  $fail "$name did not listen on 127.0.0.1:$port within 15 s"
  stop_server "$name"
  return 1
}
soft_fail() { warn "$@"; }

# --------------------------------------------------------------------------
# Ports: let the kernel pick free loopback ports (held together so distinct).
# --------------------------------------------------------------------------
PORTS=$(python3 - <<'EOF'
import socket
socks = []
for _ in range(7):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()
EOF
)
read -r P_ORIGIN P_NGINX P_VARNISH P_VARNISH_ADMIN P_SHELLAC P_SHELLAC_ADMIN P_REFERENCE <<<"$PORTS"
[[ -n ${P_REFERENCE:-} ]] || die "could not pick free ports"

# nginx as root needs an unprivileged worker user (Debian's build defaults to
# nobody:nobody, and there is no group 'nobody' on Debian).
NGINX_USER_LINE=""
if (( EUID == 0 )); then
  if id www-data >/dev/null 2>&1; then nu=www-data; else nu=nobody; fi
  NGINX_USER_LINE="user $nu $(id -gn "$nu");"
fi

# --------------------------------------------------------------------------
# Origin: bench/origin.rs (routes and headers documented there and in bench/README.md).
# --------------------------------------------------------------------------
mkdir -p "$T/origin"

# --------------------------------------------------------------------------
# nginx proxy_cache
# --------------------------------------------------------------------------
mkdir -p "$T/nginx"
cat >"$T/nginx/nginx.conf" <<EOF
$NGINX_USER_LINE
worker_processes 1;
pid $T/nginx/nginx.pid;
error_log $T/nginx/error.log warn;
worker_rlimit_nofile 20000;
events { worker_connections 20000; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 65;
    keepalive_requests 1000000;
    client_body_temp_path $T/nginx/client_body;
    proxy_temp_path       $T/nginx/proxy;
    fastcgi_temp_path     $T/nginx/fastcgi;
    uwsgi_temp_path       $T/nginx/uwsgi;
    scgi_temp_path        $T/nginx/scgi;

    proxy_cache_path $T/nginx/cache levels=1:2 keys_zone=bench:10m
                     max_size=1g inactive=60m use_temp_path=off;

    upstream origin {
        server 127.0.0.1:$P_ORIGIN;
        keepalive 32;
    }

    server {
        listen 127.0.0.1:$P_NGINX;
        location / {
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_cache bench;
            # No proxy_cache_valid: freshness comes from the origin's
            # Cache-Control, and no-store/private responses are not cached.
            # No proxy_cache_lock: nginx has no hit-for-pass, so with the lock
            # on, concurrent requests for the uncacheable /pass50k queue on
            # it and poll every 500 ms (p99 ~1 s, half the throughput).
            add_header X-Cache-Status \$upstream_cache_status always;
        }
        # Coalescing (workload 6): nginx's documented way to send one request per cold key.
        # Only here, see the note above on /pass50k.
        location /cold/ {
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_cache bench;
            proxy_cache_lock on;
            proxy_cache_lock_timeout 5s;
            add_header X-Cache-Status \$upstream_cache_status always;
        }
    }
}
EOF

# --------------------------------------------------------------------------
# Varnish
# --------------------------------------------------------------------------
mkdir -p "$T/varnish-conf"
chmod 755 "$T/varnish-conf"
cat >"$T/varnish-conf/bench.vcl" <<EOF
vcl 4.1;

backend origin {
    .host = "127.0.0.1";
    .port = "$P_ORIGIN";
}
EOF
chmod 644 "$T/varnish-conf/bench.vcl"
# As root varnishd uses its unix jail (manager as 'varnish', worker child as
# 'vcache'); that works because $T is 0755. Not as root: no jail possible.
VARNISH_JAIL=()
# Varnish closes idle client connections after 5 s by default; workload 7 holds them longer.
VARNISH_PARAMS=(-p timeout_idle=300)
if (( EUID != 0 )) || ! id varnish >/dev/null 2>&1 || ! id vcache >/dev/null 2>&1; then
  VARNISH_JAIL=(-j none)
fi

# --------------------------------------------------------------------------
# Shellac
# --------------------------------------------------------------------------
SHELLAC_OK=0
SHELLAC_SKIP_REASON=""
if [[ -x $SHELLAC ]]; then
  SHELLAC_OK=1
  cat >"$T/shellac.toml" <<EOF
[server]
listen = ["127.0.0.1:$P_SHELLAC"]
admin = "127.0.0.1:$P_SHELLAC_ADMIN"

max_connections = 20000

[cache]
memory_size = "256MiB"

[[backend]]
name = "origin"
host = "127.0.0.1"
port = $P_ORIGIN
EOF
else
  SHELLAC_SKIP_REASON="binary not found: $SHELLAC (build with cargo build --release, or set SHELLAC=)"
  warn "Shellac skipped: $SHELLAC_SKIP_REASON"
fi

# --------------------------------------------------------------------------
# Header: machine and versions
# --------------------------------------------------------------------------
out() { printf '%s\n' "$*" | tee -a "$RESULTS"; }

ver_nginx=$(nginx -v 2>&1 | head -n1)
ver_varnish=$(varnishd -V 2>&1 | head -n1)
ver_wrk=$(wrk -v 2>&1 | head -n1 || true)
ver_shellac="n/a"
if (( SHELLAC_OK )); then
  ver_shellac=$(timeout 5 "$SHELLAC" --version 2>/dev/null | head -n1 || true)
  [[ -n $ver_shellac ]] || ver_shellac="unknown ($SHELLAC)"
fi
cpu_model=$(awk -F': *' '/^model name/ {print $2; exit}' /proc/cpuinfo)
git_rev=$( (git rev-parse --short HEAD 2>/dev/null || echo none) )

out "Shellac side-by-side benchmark  ($(date -u '+%Y-%m-%d %H:%M:%S UTC'), git $git_rev)"
out "machine : nproc=$(nproc), cpu=${cpu_model:-unknown}, kernel=$(uname -sr)"
out "memory  : $(awk '/^MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
out "tools   : $ver_nginx | $ver_varnish | $ver_wrk | curl $(curl -V | awk 'NR==1{print $2}')"
out "shellac : $ver_shellac"
out "pinning : proxy under test on CPU $SERVER_CPU; origin nginx + wrk on CPU $LOAD_CPU (taskset)"
out "settings: DURATION=${DUR_S}s RUNS=$RUNS (median reported), warm-up ${WARMUP_S}s wrk + curl before each run,"
out "          wrk -t1 --latency --timeout 10s, loopback only, one proxy running at a time"
out "configs : nginx worker_processes 1, proxy_cache (honours origin Cache-Control), upstream keepalive 32,"
out "          access_log off (origin and proxy); varnishd -s malloc,256m, default params, backend-only VCL 4.1;"
out "          shellac memory_size 256MiB"
out ""

# --------------------------------------------------------------------------
# Benchmark machinery
# --------------------------------------------------------------------------
WORKLOADS=(hit6k small100 pass50k pass2ms big21m)
# ONLY="big21m hit6k" runs just those wrk workloads and skips workloads 4, 6, 7 and 8.
if [[ -n ${ONLY:-} ]]; then
  for wl in $ONLY; do
    [[ " ${WORKLOADS[*]} " == *" $wl "* ]] || die "ONLY: unknown workload '$wl' (one of: ${WORKLOADS[*]})"
  done
  read -r -a WORKLOADS <<<"$ONLY"
fi
# The reference server (no proxy, body from memory) runs only the hit workloads: the limit.
REFERENCE_WORKLOADS=" hit6k small100 "
declare -A WL_PATH=([hit6k]=/hit6k [small100]=/small100 [pass50k]=/pass50k [pass2ms]=/slow/pass50k [big21m]=/big21m)
declare -A WL_SIZE=([hit6k]=6451 [small100]=100 [pass50k]=51200 [pass2ms]=51200 [big21m]=22020096)
declare -A WL_CONNS=([hit6k]=50 [small100]=200 [pass50k]=50 [pass2ms]=50 [big21m]=10)
declare -A WL_CACHEABLE=([hit6k]=1 [small100]=1 [pass50k]=0 [pass2ms]=0 [big21m]=1)
declare -A WL_DESC=(
  [hit6k]="cache hit, 6451 B object (max-age=3600), keep-alive"
  [small100]="cache hit, 100 B object (max-age=3600), keep-alive"
  [pass50k]="pass, 51200 B uncacheable object (no-store, private), keep-alive"
  [pass2ms]="pass, 51200 B uncacheable object from an origin that takes 2 ms, keep-alive"
  [big21m]="cache hit, 22020096 B object (max-age=3600), keep-alive"
)

declare -A RES=()   # "server,workload,metric" -> space separated per-run values
declare -A NOTE=()  # "server,workload" -> notes

# is_hit SERVER HEADERS_FILE -> 0 if the response was served from cache
is_hit() {
  case $1 in
    nginx)   grep -qiE '^x-cache-status:[[:space:]]*HIT' "$2" ;;
    varnish) grep -qiE '^x-varnish:[[:space:]]*[0-9]+[[:space:]]+[0-9]+' "$2" ;;
    shellac) grep -qiE '^cache-status:.*shellac;[[:space:]]*hit' "$2" ;;
    reference) return 0 ;;
  esac
}

cache_hdrs() {  # the cache-related response headers, on one line
  grep -iE '^(x-cache-status|x-varnish|age|cache-status|cache-control):' "$1" \
    | tr -d '\r' | paste -sd ';' - | sed 's/;/; /g'
}

# check_cache SERVER PORT WORKLOAD
check_cache() {
  local s=$1 port=$2 wl=$3 h="$T/hdrs" size code
  read -r code size < <(curl -s -D "$h" -o /dev/null --max-time 30 \
      -w '%{http_code} %{size_download}\n' "http://127.0.0.1:$port${WL_PATH[$wl]}") \
    || { warn "$s $wl: curl check failed"; return 0; }
  if [[ $code != 200 || $size != "${WL_SIZE[$wl]}" ]]; then
    warn "$s $wl: check request got HTTP $code, $size bytes (want 200, ${WL_SIZE[$wl]})"
  fi
  if (( WL_CACHEABLE[$wl] )); then
    if is_hit "$s" "$h"; then
      log "  $s $wl: cache HIT confirmed ($(cache_hdrs "$h"))"
    else
      warn "$s $wl: expected a cache HIT, got: $(cache_hdrs "$h")"
      NOTE["$s,$wl"]+="not-a-hit "
    fi
  else
    if is_hit "$s" "$h"; then
      warn "$s $wl: uncacheable object was served as a HIT: $(cache_hdrs "$h")"
      NOTE["$s,$wl"]+="unexpected-hit "
    else
      log "  $s $wl: not cached, as intended ($(cache_hdrs "$h"))"
    fi
  fi
}

# wrk prints p50/p75/p90/p99; this script adds p99.9 and the request count.
cat >"$T/pctl.lua" <<'LUA'
done = function(summary, latency, requests)
  io.write(string.format("P999_US %d\nREQUESTS %d\n", latency:percentile(99.9), summary.requests))
end
LUA

# cpu_ticks PID -> utime+stime of PID and its descendants (clock ticks)
cpu_ticks() {
  local p total=0 f
  for p in "$1" $(descendants "$1"); do
    [[ -r /proc/$p/stat ]] || continue
    f=$(sed 's/^.*) //' "/proc/$p/stat")
    # fields after the command: 12 = utime, 13 = stime
    total=$(( total + $(awk '{print $12 + $13}' <<<"$f") ))
  done
  echo "$total"
}

# rss_kib PID -> resident set of PID and its descendants (KiB)
rss_kib() {
  local p total=0 v
  for p in "$1" $(descendants "$1"); do
    v=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || true)
    total=$(( total + ${v:-0} ))
  done
  echo "$total"
}

# run_wrk PORT WORKLOAD SECONDS OUTFILE
run_wrk() {
  local port=$1 wl=$2 secs=$3 outf=$4
  timeout --kill-after=5 $(( secs + 30 )) \
    taskset -c "$LOAD_CPU" wrk -t1 -c"${WL_CONNS[$wl]}" -d"${secs}s" --timeout 10s --latency -s "$T/pctl.lua" \
    "http://127.0.0.1:$port${WL_PATH[$wl]}" >"$outf" 2>&1 \
    || { warn "wrk exited non-zero for $wl on port $port"; cat "$outf" >&2; return 1; }
}

# parse_wrk FILE -> "rps p50_ms p99_ms mb_per_s errors p999_ms requests"
parse_wrk() {
  awk '
    function ms(v,   n, u) {
      n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
      if (u == "us") return n / 1000
      if (u == "ms") return n
      if (u == "s")  return n * 1000
      if (u == "m")  return n * 60000
      if (u == "h")  return n * 3600000
      return n
    }
    function mb(v,   n, u) {
      n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
      if (u == "B")  return n / 1048576
      if (u == "KB") return n / 1024
      if (u == "MB") return n
      if (u == "GB") return n * 1024
      if (u == "TB") return n * 1048576
      return n
    }
    BEGIN { rps = "NA"; p50 = "NA"; p99 = "NA"; p999 = "NA"; mbs = "NA"; err = 0; reqs = "NA" }
    $1 == "P999_US"       { p999 = $2 / 1000 }
    $1 == "REQUESTS"      { reqs = $2 }
    $1 == "50%"           { p50 = ms($2) }
    $1 == "99%"           { p99 = ms($2) }
    $1 == "Requests/sec:" { rps = $2 + 0 }
    $1 == "Transfer/sec:" { mbs = mb($2) }
    /Socket errors:/      { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+,?$/) err += $i + 0 }
    /Non-2xx or 3xx/      { err += $NF + 0 }
    END { printf "%s %s %s %s %d %s %s\n", rps, p50, p99, mbs, err, p999, reqs }
  ' "$1"
}

median() {  # numbers as args -> median
  printf '%s\n' "$@" | grep -v '^NA$' | sort -g | awk '
    { v[NR] = $1 }
    END {
      if (NR == 0) { print "NA"; exit }
      if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2
    }'
}

# bench_server SERVER PORT
bench_server() {
  local s=$1 port=$2 wl run i f rps p50 p99 mbs err p999 reqs t0 t1 cpu rss pid
  pid=${PID_OF[$s]}
  for wl in "${WORKLOADS[@]}"; do
    [[ $s == reference && $REFERENCE_WORKLOADS != *" $wl "* ]] && continue
    for (( run = 1; run <= RUNS; run++ )); do
      log "$s / $wl / run $run of $RUNS: warm-up"
      for (( i = 0; i < 3; i++ )); do
        curl -s -o /dev/null --max-time 30 "http://127.0.0.1:$port${WL_PATH[$wl]}" \
          || warn "$s $wl: warm-up curl failed"
      done
      run_wrk "$port" "$wl" "$WARMUP_S" "$T/warmup.txt" || true
      check_cache "$s" "$port" "$wl"
      f="$T/wrk-$s-$wl-$run.txt"
      log "$s / $wl / run $run of $RUNS: measuring ${DUR_S}s with ${WL_CONNS[$wl]} connections"
      t0=$(cpu_ticks "$pid")
      if run_wrk "$port" "$wl" "$DUR_S" "$f"; then
        read -r rps p50 p99 mbs err p999 reqs < <(parse_wrk "$f")
      else
        rps=NA p50=NA p99=NA mbs=NA err=1 p999=NA reqs=NA
      fi
      t1=$(cpu_ticks "$pid")
      rss=$(rss_kib "$pid")
      if [[ $reqs != NA ]] && (( reqs > 0 )); then
        cpu=$(awk -v t="$(( t1 - t0 ))" -v hz="$(getconf CLK_TCK)" -v n="$reqs" 'BEGIN{printf "%.3f", t / hz / n * 100000}')
      else
        cpu=NA
      fi
      if (( err > 0 )); then
        warn "$s $wl run $run: wrk reported $err errors/non-2xx responses"
        grep -E 'Socket errors|Non-2xx' "$f" >&2 || true
        NOTE["$s,$wl"]+="errors=$err "
      fi
      log "  -> req/s=$rps p50=${p50}ms p99=${p99}ms p99.9=${p999}ms MB/s=$mbs cpu/100k=${cpu}s rss=${rss}KiB"
      RES["$s,$wl,p999"]+="$p999 "
      RES["$s,$wl,cpu"]+="$cpu "
      RES["$s,$wl,rss"]+="$rss "
      RES["$s,$wl,rps"]+="$rps "
      RES["$s,$wl,p50"]+="$p50 "
      RES["$s,$wl,p99"]+="$p99 "
      RES["$s,$wl,mbs"]+="$mbs "
    done
  done
}

# kv FILE KEY -> the value of a `KEY value` line printed by bench/clients.rs (NA if absent)
kv() { awk -v k="$2" '$1 == k {print $2; found = 1} END {if (!found) print "NA"}' "$1"; }

# Workloads 4, 6 and 7 (bench/clients.rs), after the wrk workloads, on the same server.
# Workload 6 once: a cold request alone (the baseline), then BURST at once on another cold key;
# the backend requests are what ORIGIN_PORT's origin counted for the burst key ("-" without).
# bench_burst NAME PORT RUN [ORIGIN_PORT]
bench_burst() {
  local s=$1 port=$2 run=$3 origin=${4:-} single key f count=-
  single=$(curl -s -o /dev/null --max-time 30 -w '%{time_total}' \
    "http://127.0.0.1:$port/cold/$s-single-$run" | awk '{printf "%.3f", $1 * 1000}')
  key="/cold/$s-burst-$run"
  f="$T/burst-$s-$run.txt"
  log "$s / coalesce / run $run of $RUNS: $BURST simultaneous requests for $key"
  timeout --kill-after=5 120 taskset -c "$LOAD_CPU" \
    "$CLIENTS" burst "127.0.0.1:$port" "$key" "$BURST" >"$f" 2>&1 \
    || warn "$s coalesce run $run: clients exited non-zero: $(tail -n 3 "$f")"
  [[ -n $origin ]] && count=$(curl -s --max-time 10 "http://127.0.0.1:$origin/__count$key")
  [[ $(kv "$f" ERRORS) == 0 ]] || NOTE["$s,coalesce"]+="errors=$(kv "$f" ERRORS) "
  log "  -> backend requests=$count single=${single}ms last done=$(kv "$f" LAST_DONE_MS)ms p50=$(kv "$f" P50_MS)ms"
  RES["$s,coalesce,backend"]+="$count "
  RES["$s,coalesce,single"]+="$single "
  RES["$s,coalesce,last"]+="$(kv "$f" LAST_DONE_MS) "
  RES["$s,coalesce,p50"]+="$(kv "$f" P50_MS) "
}

# bench_special SERVER PORT
bench_special() {
  local s=$1 port=$2 pid run f t0 t1 reqs cpu single key count rss0 rss1 ipid i
  pid=${PID_OF[$s]}
  for (( run = 1; run <= RUNS; run++ )); do
    # 4. miss storm: MISS_KEYS distinct cacheable keys, each requested once, 50 connections.
    f="$T/miss-$s-$run.txt"
    log "$s / missstorm / run $run of $RUNS: $MISS_KEYS distinct keys"
    t0=$(cpu_ticks "$pid")
    timeout --kill-after=5 300 taskset -c "$LOAD_CPU" \
      "$CLIENTS" unique "127.0.0.1:$port" "/obj/$s-r$run-" "$MISS_KEYS" 50 >"$f" 2>&1 \
      || warn "$s missstorm run $run: clients exited non-zero: $(tail -n 3 "$f")"
    t1=$(cpu_ticks "$pid")
    reqs=$(kv "$f" REQUESTS)
    cpu=NA
    [[ $reqs != NA ]] && cpu=$(awk -v t="$(( t1 - t0 ))" -v hz="$(getconf CLK_TCK)" -v n="$reqs" \
      'BEGIN{printf "%.3f", t / hz / n * 100000}')
    [[ $(kv "$f" ERRORS) == 0 ]] || NOTE["$s,missstorm"]+="errors=$(kv "$f" ERRORS) "
    log "  -> req/s=$(kv "$f" RPS) p50=$(kv "$f" P50_MS)ms p99=$(kv "$f" P99_MS)ms cpu/100k=${cpu}s"
    RES["$s,missstorm,rps"]+="$(kv "$f" RPS) "
    RES["$s,missstorm,p50"]+="$(kv "$f" P50_MS) "
    RES["$s,missstorm,p99"]+="$(kv "$f" P99_MS) "
    RES["$s,missstorm,p999"]+="$(kv "$f" P999_MS) "
    RES["$s,missstorm,cpu"]+="$cpu "
    RES["$s,missstorm,rss"]+="$(rss_kib "$pid") "

    # 6. coalescing: one cold request for the baseline, then BURST at once on another cold key.
    bench_burst "$s" "$port" "$run" "$P_ORIGIN"
  done

  # 7. IDLE_CONNS idle keep-alive connections held open while workload 1 runs (once).
  f="$T/idle-$s.txt"
  rss0=$(rss_kib "$pid")
  log "$s / idle: opening $IDLE_CONNS keep-alive connections"
  timeout --kill-after=5 $(( DUR_S + 240 )) taskset -c "$LOAD_CPU" \
    "$CLIENTS" idle "127.0.0.1:$port" /hit6k "$IDLE_CONNS" $(( DUR_S + 120 )) >"$f" 2>&1 &
  ipid=$!
  for (( i = 0; i < 1200; i++ )); do        # up to 120 s to open them
    grep -q '^IDLE_READY' "$f" 2>/dev/null && break
    kill -0 "$ipid" 2>/dev/null || break
    sleep 0.1
  done
  # Read at +1 s and once settled (+4 s): Shellac releases an idle connection's session after
  # server.idle_release (1 s) and gives the freed pages back after the burst; nginx and Varnish
  # hold the same memory at both times.
  sleep 1
  rss1early=$(rss_kib "$pid")
  sleep 3
  rss1=$(rss_kib "$pid")
  log "  -> $(kv "$f" IDLE_READY) open ($(kv "$f" IDLE_FAILED) failed); RSS ${rss0} -> ${rss1early} (+1 s) -> ${rss1} KiB (+4 s)"
  if run_wrk "$port" hit6k "$DUR_S" "$T/wrk-$s-idle.txt"; then
    RES["$s,idle,rps"]=$(parse_wrk "$T/wrk-$s-idle.txt" | awk '{print $1}')
    RES["$s,idle,p99"]=$(parse_wrk "$T/wrk-$s-idle.txt" | awk '{print $3}')
  else
    RES["$s,idle,rps"]=NA; RES["$s,idle,p99"]=NA
  fi
  RES["$s,idle,open"]=$(kv "$f" IDLE_READY)
  RES["$s,idle,perconn"]=$(awk -v a="$rss0" -v b="$rss1" -v n="$(kv "$f" IDLE_READY)" \
    'BEGIN{ if (n + 0 > 0) printf "%.2f", (b - a) / n; else print "NA" }')
  RES["$s,idle,perconn1"]=$(awk -v a="$rss0" -v b="$rss1early" -v n="$(kv "$f" IDLE_READY)" \
    'BEGIN{ if (n + 0 > 0) printf "%.2f", (b - a) / n; else print "NA" }')
  log "  -> hit6k with idle connections: req/s=${RES[$s,idle,rps]}; ${RES[$s,idle,perconn]} KiB per idle connection"
  stop_pid "$ipid"
}

# Workload 8: a fresh server with a large cache, OBJECTS small objects, RSS before and after;
# then a fresh server with a 64 MiB cache filled with 3x its size of 6.3 KB objects.
# bench_objects SERVER
bench_objects() {
  local s=$1 port f rss0 rss1 conf
  for phase in count bound; do
    case $s in
      shellac)
        port=$P_SHELLAC
        conf="$T/shellac-$phase.toml"
        sed -e "s/^memory_size = .*/memory_size = \"$([[ $phase == count ]] && echo 4GiB || echo 64MiB)\"/" \
          "$T/shellac.toml" >"$conf"
        start_server shellac "$P_SHELLAC" "$T/shellac-$phase.log" \
          taskset -c "$SERVER_CPU" "$SHELLAC" serve --config "$conf" || return 0 ;;
      varnish)
        port=$P_VARNISH
        start_server varnish "$P_VARNISH" "$T/varnish-$phase.log" \
          taskset -c "$SERVER_CPU" varnishd -F "${VARNISH_JAIL[@]}" \
            -a "127.0.0.1:$P_VARNISH" -T "127.0.0.1:$P_VARNISH_ADMIN" \
            -f "$T/varnish-conf/bench.vcl" -s "malloc,$([[ $phase == count ]] && echo 4g || echo 64m)" \
            -n "$T/varnish" "${VARNISH_PARAMS[@]}" || return 0 ;;
    esac
    taskset -c "$LOAD_CPU" "$CLIENTS" unique "127.0.0.1:$port" "/obj/warm-" 1000 20 >/dev/null 2>&1 || true
    sleep 1
    rss0=$(rss_kib "${PID_OF[$s]}")
    f="$T/objects-$s-$phase.txt"
    if [[ $phase == count ]]; then
      log "$s / objects: caching $OBJECTS objects of 100 B"
      timeout --kill-after=5 900 taskset -c "$LOAD_CPU" \
        "$CLIENTS" unique "127.0.0.1:$port" "/obj/o-" "$OBJECTS" 100 >"$f" 2>&1 \
        || warn "$s objects: clients exited non-zero: $(tail -n 3 "$f")"
    else
      log "$s / objects: 30000 objects of 6451 B through a 64 MiB cache"
      timeout --kill-after=5 300 taskset -c "$LOAD_CPU" \
        "$CLIENTS" unique "127.0.0.1:$port" "/obj6k/b-" 30000 50 >"$f" 2>&1 \
        || warn "$s objects (bound): clients exited non-zero: $(tail -n 3 "$f")"
    fi
    sleep 2
    rss1=$(rss_kib "${PID_OF[$s]}")
    RES["$s,objects-$phase,rss0"]=$rss0
    RES["$s,objects-$phase,rss1"]=$rss1
    RES["$s,objects-$phase,errors"]=$(kv "$f" ERRORS)
    log "  -> RSS ${rss0} -> ${rss1} KiB, fill req/s=$(kv "$f" RPS), errors=$(kv "$f" ERRORS)"
    stop_server "$s"
  done
}

# --------------------------------------------------------------------------
# Run
# --------------------------------------------------------------------------
start_server origin "$P_ORIGIN" "$T/origin/stderr.log" \
  taskset -c "$LOAD_CPU" "$ORIGIN" "127.0.0.1:$P_ORIGIN"
# Sanity-check the origin.
for wl in "${WORKLOADS[@]}"; do
  read -r code size < <(curl -s -o /dev/null --max-time 30 -w '%{http_code} %{size_download}\n' \
    "http://127.0.0.1:$P_ORIGIN${WL_PATH[$wl]}")
  [[ $code == 200 && $size == "${WL_SIZE[$wl]}" ]] \
    || die "origin ${WL_PATH[$wl]}: HTTP $code, $size bytes (want 200, ${WL_SIZE[$wl]})"
done

SERVERS=(nginx varnish)
(( SHELLAC_OK )) && SERVERS+=(shellac)
REFERENCE_OK=0
if [[ -x $REFERENCE ]]; then
  REFERENCE_OK=1
  SERVERS=(reference "${SERVERS[@]}")
else
  warn "reference server skipped: $REFERENCE not found (cargo build --release --example reference)"
fi

for s in "${SERVERS[@]}"; do
  case $s in
    nginx)
      start_server nginx "$P_NGINX" "$T/nginx/stderr.log" \
        taskset -c "$SERVER_CPU" nginx -p "$T/nginx" -e "$T/nginx/error.log" \
          -c "$T/nginx/nginx.conf" -g 'daemon off;'
      port=$P_NGINX ;;
    varnish)
      start_server varnish "$P_VARNISH" "$T/varnish.log" \
        taskset -c "$SERVER_CPU" varnishd -F "${VARNISH_JAIL[@]}" \
          -a "127.0.0.1:$P_VARNISH" -T "127.0.0.1:$P_VARNISH_ADMIN" \
          -f "$T/varnish-conf/bench.vcl" -s malloc,256m -n "$T/varnish" "${VARNISH_PARAMS[@]}"
      port=$P_VARNISH ;;
    reference)
      start_server reference "$P_REFERENCE" "$T/reference.log" \
        taskset -c "$SERVER_CPU" "$REFERENCE" "127.0.0.1:$P_REFERENCE" 6451
      port=$P_REFERENCE ;;
    shellac)
      if ! SOFT=1 start_server shellac "$P_SHELLAC" "$T/shellac.log" \
          taskset -c "$SERVER_CPU" "$SHELLAC" serve --config "$T/shellac.toml"; then
        SHELLAC_OK=0
        SHELLAC_SKIP_REASON="$SHELLAC serve --config ... failed to start (see warnings)"
        warn "Shellac skipped: $SHELLAC_SKIP_REASON"
        continue
      fi
      port=$P_SHELLAC ;;
  esac
  bench_server "$s" "$port"
  [[ $s == reference || -n ${ONLY:-} ]] || bench_special "$s" "$port"
  stop_server "$s"
  log "$s stopped"
done

# Workload 6's floor: the same burst straight to a second origin on the proxies' CPU, no proxy
# in between: what the client and the transfer of BURST responses take by themselves.
if [[ -z ${ONLY:-} ]] && SOFT=1 start_server direct "$P_REFERENCE" "$T/direct.log" \
    taskset -c "$SERVER_CPU" "$ORIGIN" "127.0.0.1:$P_REFERENCE"; then
  for (( run = 1; run <= RUNS; run++ )); do
    bench_burst direct "$P_REFERENCE" "$run"
  done
  stop_server direct
fi

# Workload 8 needs a fresh server per phase. nginx's proxy_cache keeps objects in files (its
# memory holds only the keys zone), so memory per cached object applies to Varnish and Shellac.
for s in varnish shellac; do
  [[ $s == shellac && $SHELLAC_OK == 0 || -n ${ONLY:-} ]] && continue
  bench_objects "$s"
done

# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------
fmt() {  # fmt NUMBER DECIMALS
  if [[ $1 == NA ]]; then printf 'n/a'; else printf "%.${2}f" "$1"; fi
}
ratio() {
  if [[ $1 == NA || $2 == NA ]] || awk -v b="$2" 'BEGIN{exit !(b == 0)}'; then
    printf 'n/a'
  else
    awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2fx", a / b}'
  fi
}

declare -A MED=()
for wl in "${WORKLOADS[@]}"; do
  if [[ $wl == big21m ]]; then key=mbs; keyname="MB/s"; else key=rps; keyname="req/s"; fi
  out "== $wl: GET ${WL_PATH[$wl]} -- ${WL_DESC[$wl]}, ${WL_CONNS[$wl]} connections =="
  out "$(printf '%-9s %12s %9s %9s %9s %10s %9s %8s   %s' server req/s 'p50 ms' 'p99 ms' 'p99.9 ms' 'MB/s' 'cpu/100k' 'RSS MiB' notes)"
  for s in reference nginx varnish shellac; do
    if [[ $s == reference ]] && { (( ! REFERENCE_OK )) || [[ $REFERENCE_WORKLOADS != *" $wl "* ]]; }; then
      continue
    fi
    if [[ $s == shellac && $SHELLAC_OK == 0 ]]; then
      out "$(printf '%-9s %s' shellac "skipped: $SHELLAC_SKIP_REASON")"
      continue
    fi
    for m in rps p50 p99 p999 mbs cpu rss; do
      # shellcheck disable=SC2086
      MED["$s,$wl,$m"]=$(median ${RES["$s,$wl,$m"]:-NA})
    done
    rss_mib=NA
    [[ ${MED[$s,$wl,rss]} != NA ]] && rss_mib=$(awk -v k="${MED[$s,$wl,rss]}" 'BEGIN{print k / 1024}')
    out "$(printf '%-9s %12s %9s %9s %9s %10s %9s %8s   %s' "$s" \
      "$(fmt "${MED[$s,$wl,rps]}" 0)" "$(fmt "${MED[$s,$wl,p50]}" 3)" \
      "$(fmt "${MED[$s,$wl,p99]}" 3)" "$(fmt "${MED[$s,$wl,p999]}" 3)" "$(fmt "${MED[$s,$wl,mbs]}" 1)" \
      "$(fmt "${MED[$s,$wl,cpu]}" 3)" "$(fmt "$rss_mib" 1)" "${NOTE[$s,$wl]:-}" | sed 's/ *$//')"
  done
  if (( SHELLAC_OK )); then
    refratio=""
    if (( REFERENCE_OK )) && [[ $REFERENCE_WORKLOADS == *" $wl "* ]]; then
      refratio=", shellac/reference = $(ratio "${MED[shellac,$wl,$key]}" "${MED[reference,$wl,$key]}")"
    fi
    out "ratio ($keyname): shellac/nginx = $(ratio "${MED[shellac,$wl,$key]}" "${MED[nginx,$wl,$key]}"),"\
" shellac/varnish = $(ratio "${MED[shellac,$wl,$key]}" "${MED[varnish,$wl,$key]}")$refratio"
  else
    out "ratio ($keyname): shellac/nginx = n/a, shellac/varnish = n/a (shellac skipped)"
  fi
  out ""
done
# Workloads 4, 6, 7 and 8 (not with ONLY).
if [[ -z ${ONLY:-} ]]; then
  # Workloads 4, 6, 7 and 8.
  SPECIAL_SERVERS=(nginx varnish)
  (( SHELLAC_OK )) && SPECIAL_SERVERS+=(shellac)
  for m in rps p50 p99 p999 cpu rss; do
    for s in "${SPECIAL_SERVERS[@]}"; do
      # shellcheck disable=SC2086
      MED["$s,missstorm,$m"]=$(median ${RES["$s,missstorm,$m"]:-NA})
    done
  done
  out "== missstorm: $MISS_KEYS distinct cacheable keys (GET /obj/<n>, 100 B), each requested once, 50 connections (bench/clients.rs) =="
  out "$(printf '%-9s %12s %9s %9s %9s %9s' server req/s 'p50 ms' 'p99 ms' 'p99.9 ms' 'cpu/100k')"
  for s in "${SPECIAL_SERVERS[@]}"; do
    out "$(printf '%-9s %12s %9s %9s %9s %9s   %s' "$s" "$(fmt "${MED[$s,missstorm,rps]}" 0)" \
      "$(fmt "${MED[$s,missstorm,p50]}" 3)" "$(fmt "${MED[$s,missstorm,p99]}" 3)" \
      "$(fmt "${MED[$s,missstorm,p999]}" 3)" "$(fmt "${MED[$s,missstorm,cpu]}" 3)" "${NOTE[$s,missstorm]:-}" | sed 's/ *$//')"
  done
  (( SHELLAC_OK )) && out "ratio (req/s): shellac/nginx = $(ratio "${MED[shellac,missstorm,rps]}" "${MED[nginx,missstorm,rps]}"), shellac/varnish = $(ratio "${MED[shellac,missstorm,rps]}" "${MED[varnish,missstorm,rps]}")"
  out ""

  out "== coalesce: $BURST simultaneous requests for one cold key (GET /cold/<key>, origin takes 200 ms), one connection each =="
  out "$(printf '%-9s %16s %11s %13s %11s %8s' server backend-requests 'single ms' 'last done ms' 'p50 ms' 'last/single')"
  for s in "${SPECIAL_SERVERS[@]}" direct; do
    [[ -n ${RES[$s,coalesce,last]:-} ]] || continue
    for m in backend single last p50; do
      # shellcheck disable=SC2086
      MED["$s,coalesce,$m"]=$(median ${RES["$s,coalesce,$m"]:-NA})
    done
    out "$(printf '%-9s %16s %11s %13s %11s %8s   %s' "$s" "${RES[$s,coalesce,backend]:-NA}" \
      "$(fmt "${MED[$s,coalesce,single]}" 1)" "$(fmt "${MED[$s,coalesce,last]}" 1)" \
      "$(fmt "${MED[$s,coalesce,p50]}" 1)" "$(ratio "${MED[$s,coalesce,last]}" "${MED[$s,coalesce,single]}")" \
      "${NOTE[$s,coalesce]:-}" | sed 's/ *$//')"
  done
  out "backend-requests: what the origin counted for the burst key, per run; single: one cold request alone."
  out "direct: the same burst straight to an origin on the proxies' CPU (no proxy): the floor the client"
  out "and the transfer of $BURST responses set by themselves."
  out ""

  out "== idle: $IDLE_CONNS idle keep-alive connections held open while hit6k runs (50 connections) =="
  out "$(printf '%-9s %8s %15s %11s %12s %12s %9s' server open 'KiB/idle conn' 'at +1 s' 'req/s idle' 'req/s hit6k' change)"
  for s in "${SPECIAL_SERVERS[@]}"; do
    out "$(printf '%-9s %8s %15s %11s %12s %12s %9s' "$s" "${RES[$s,idle,open]:-NA}" "${RES[$s,idle,perconn]:-NA}" "${RES[$s,idle,perconn1]:-NA}" \
      "$(fmt "${RES[$s,idle,rps]:-NA}" 0)" "$(fmt "${MED[$s,hit6k,rps]:-NA}" 0)" \
      "$(awk -v a="${RES[$s,idle,rps]:-NA}" -v b="${MED[$s,hit6k,rps]:-NA}" \
         'BEGIN{ if (a == "NA" || b == "NA" || b == 0) print "n/a"; else printf "%+.1f%%", (a / b - 1) * 100 }')")"
  done
  out "KiB/idle conn: RSS growth per connection 4 s after the last one opened; at +1 s: 1 s after it"
  out "(Shellac's sessions are released after idle_release, 1 s). change: against workload 1's median"
  out "above, not the same moment; bench/idle_hit.sh measures it in rounds."
  out ""

  # Stored bytes per small object: body + the origin's header fields (names and values) + key.
  hdr_bytes=$(curl -s -D - -o /dev/null "http://127.0.0.1:$P_ORIGIN/obj/o-1" \
    | tr -d '\r' | awk -F': ' 'NR > 1 && NF >= 2 {n += length($1) + length($0) - length($1) - 2} END {print n + 0}')
  key_bytes=$(awk -v n="$OBJECTS" 'BEGIN{ d = 0; for (p = 1; p <= n; p *= 10) { c = (n < p * 10 ? n : p * 10) - p; d += c * (length(p "") ) } printf "%.1f", length("bench.test/obj/o-") + d / n }')
  payload=$(awk -v h="$hdr_bytes" -v k="$key_bytes" 'BEGIN{printf "%.0f", 100 + h + k}')
  out "== objects: RSS after caching $OBJECTS objects of 100 B (fresh server, 4 GiB cache) =="
  out "stored bytes per object: body 100 + header fields $hdr_bytes + key $key_bytes = $payload B"
  out "$(printf '%-9s %11s %11s %13s %14s' server 'RSS0 MiB' 'RSS1 MiB' 'B per object' 'overhead B')"
  for s in varnish shellac; do
    [[ -n ${RES[$s,objects-count,rss1]:-} ]] || continue
    per=$(awk -v a="${RES[$s,objects-count,rss0]}" -v b="${RES[$s,objects-count,rss1]}" -v n="$OBJECTS" 'BEGIN{printf "%.0f", (b - a) * 1024 / n}')
    out "$(printf '%-9s %11s %11s %13s %14s   errors=%s' "$s" "$(awk -v k="${RES[$s,objects-count,rss0]}" 'BEGIN{printf "%.1f", k/1024}')" \
      "$(awk -v k="${RES[$s,objects-count,rss1]}" 'BEGIN{printf "%.1f", k/1024}')" "$per" "$(( per - payload ))" "${RES[$s,objects-count,errors]}")"
  done
  out "== objects: RSS with a 64 MiB cache after 30,000 objects of 6451 B (3x the cache size) =="
  out "$(printf '%-9s %11s %11s %12s' server 'RSS0 MiB' 'RSS1 MiB' 'RSS1/64 MiB')"
  for s in varnish shellac; do
    [[ -n ${RES[$s,objects-bound,rss1]:-} ]] || continue
    out "$(printf '%-9s %11s %11s %12s   errors=%s' "$s" "$(awk -v k="${RES[$s,objects-bound,rss0]}" 'BEGIN{printf "%.1f", k/1024}')" \
      "$(awk -v k="${RES[$s,objects-bound,rss1]}" 'BEGIN{printf "%.1f", k/1024}')" \
      "$(awk -v k="${RES[$s,objects-bound,rss1]}" 'BEGIN{printf "%.2f", k/1024/64}')" "${RES[$s,objects-bound,errors]}")"
  done
fi
out ""
out "MB/s is wrk's Transfer/sec (MiB/s: wrk uses 1024-based units), body + headers."
out "Values are the median over $RUNS run(s) of ${DUR_S}s, each metric taken separately."
out "cpu/100k: CPU seconds (user+sys, the server and its children) per 100,000 requests;"
out "RSS: resident memory of the server process tree after the run."
# HTTP/2 (issue 20): h2load hit throughput and memory per idle HTTP/2 connection, Shellac vs
# nginx (its own servers, same pinning); H2=0 skips it.
if [[ ${H2:-1} == 1 && -z ${ONLY:-} ]]; then
  out ""
  out "== HTTP/2 (h2c, bench/h2.sh) =="
  if h2out=$(SHELLAC="$SHELLAC" ORIGIN="$ORIGIN" RUNS="$RUNS" bench/h2.sh 2>&1); then
    while IFS= read -r line; do out "$line"; done <<<"$h2out"
  else
    warn "bench/h2.sh failed: $(tail -n1 <<<"$h2out")"
  fi
fi
# TLS (issue 20): keep-alive hits, handshakes (full and resumed) and memory per idle TLS
# connection, Shellac vs nginx (bench/tls.sh, its own servers, same pinning); TLS=0 skips it.
# Handshakes run with each server capped at TLS_QUOTA% (15) of a CPU, 6 resuming clients
# at once (TLS_PAR), so the servers are the limit, not the client on the other core.
if [[ ${TLS:-1} == 1 && -z ${ONLY:-} ]]; then
  out ""
  out "== TLS (bench/tls.sh) =="
  if tlsout=$(SHELLAC="$SHELLAC" ORIGIN="$ORIGIN" RUNS="$RUNS" QUOTA="${TLS_QUOTA-15}" PAR="${TLS_PAR:-6}" bench/tls.sh 2>&1); then
    while IFS= read -r line; do out "$line"; done <<<"$tlsout"
  else
    warn "bench/tls.sh failed: $(tail -n1 <<<"$tlsout")"
  fi
fi
if (( ${#WARNINGS[@]} )); then
  out ""
  out "Warnings during the run:"
  for w in "${WARNINGS[@]}"; do out "  - $w"; done
fi

cp "$RESULTS" "$SCRIPT_DIR/last-run.txt"
log "results written to bench/last-run.txt"
