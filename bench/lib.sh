# Shared by the bench scripts (sourced, not run): a temporary directory and the PIDs of
# everything the script starts, both cleaned up on exit, a free loopback port, and the helpers
# the paired measurements share (start the origin and Shellac, CPU time of a process, median,
# waiting for a hit, two wrks at once).
TMP=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; [[ ${KEEP_TMP:-0} == 1 ]] && echo "kept $TMP" >&2 || rm -rf "$TMP"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# CPU time (user + system, all threads) of a process so far, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# The median of the numbers given as arguments.
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# Waits up to 10 s until GET http://127.0.0.1:PORT/PATH is a Shellac cache hit; fails if never.
wait_for_hit() {
  local _
  for _ in $(seq 200); do
    curl -s -D - -o /dev/null "http://127.0.0.1:$1/$2" 2>/dev/null | grep -qi '^cache-status: shellac; hit' && return 0
    sleep 0.05
  done
  echo "no cache hit on port $1 for /$2" >&2
  return 1
}
# Two wrk runs at the same time on CPU 1: paired_wrk CONNS SECS URL_A OUT_A URL_B OUT_B
paired_wrk() {
  timeout $(($2 + 30)) taskset -c 1 wrk -t1 -c"$1" -d"$2s" "$3" >"$4" &
  local first=$!
  timeout $(($2 + 30)) taskset -c 1 wrk -t1 -c"$1" -d"$2s" "$5" >"$6"
  wait "$first"
}
# Two servers measured at once (both already serving /$OBJECT): WARM s of paired wrk, then
# $SECS s measured with $CONNS connections each; stops both; prints
# "requests_a µs_a requests_b µs_b A/B%" (CPU per request, user + system, all threads).
#   paired_cpu PID_A PORT_A PID_B PORT_B WARM
paired_cpu() {
  local pa=$1 porta=$2 pb=$3 portb=$4 a0 b0 a1 b1 ra rb
  local url_a="http://127.0.0.1:$porta/$OBJECT" url_b="http://127.0.0.1:$portb/$OBJECT"
  paired_wrk "$CONNS" "$5" "$url_a" /dev/null "$url_b" /dev/null
  a0=$(cpu_ticks "$pa"); b0=$(cpu_ticks "$pb")
  paired_wrk "$CONNS" "$SECS" "$url_a" "$TMP/wrk-a.txt" "$url_b" "$TMP/wrk-b.txt"
  a1=$(cpu_ticks "$pa"); b1=$(cpu_ticks "$pb")
  ra=$(awk '/requests in/ {print $1}' "$TMP/wrk-a.txt")
  rb=$(awk '/requests in/ {print $1}' "$TMP/wrk-b.txt")
  kill -TERM "$pa" "$pb"; wait "$pa" "$pb" 2>/dev/null || true
  python3 -c "
t = $(getconf CLK_TCK)
a = ($a1 - $a0) * 1e6 / t / $ra
b = ($b1 - $b0) * 1e6 / t / $rb
print(f'$ra {a:.2f} $rb {b:.2f} {100 * a / b:.1f}')"
}
# Starts ORIGIN (bench/origin.rs) on CPU 1 and sets ORIGIN_PORT.
start_origin() {
  ORIGIN_PORT=$(free_port)
  taskset -c 1 "$1" "127.0.0.1:$ORIGIN_PORT" >/dev/null 2>&1 &
  PIDS+=($!)
}
# Starts a Shellac binary on CPU 0, one worker thread, in front of ORIGIN_PORT, and prints
# "port admin-port pid" (the caller adds the pid to PIDS: this usually runs in a subshell).
#   start_shellac BINARY [TOML [VAR=VALUE]]
# TOML is added after `[server]`'s keys: more server keys, then any other sections.
start_shellac() {
  local port admin
  port=$(free_port); admin=$(free_port)
  printf '[server]\nlisten = ["127.0.0.1:%s"]\nadmin = "127.0.0.1:%s"\nthreads = 1\n%s\n\n[[backend]]\nhost = "127.0.0.1"\nport = %s\n' \
    "$port" "$admin" "${2:-}" "$ORIGIN_PORT" > "$TMP/shellac-$port.toml"
  env ${3:+"$3"} taskset -c 0 "$1" serve --config "$TMP/shellac-$port.toml" 2>"$TMP/shellac-$port.err" &
  echo "$port $admin $!"
}
# Exits with a hint unless every argument is a command on PATH (the servers compared).
need_tools() {
  local t
  for t in "$@"; do command -v "$t" >/dev/null || { echo "needs $t" >&2; exit 1; }; done
}
# Starts Varnish on CPU 0 with the VCL read from standard input (kept as $TMP/varnish.vcl),
# 256 MiB of malloc storage and one thread pool, then the varnishd arguments given; sets
# P_VARNISH and VPID (added to PIDS); its log is $TMP/varnish.log. As root with Debian's
# `varnish` and `vcache` users it keeps its jail, else `-j none`. Run it in the script's shell
# (not a subshell: it sets variables).
#   start_varnish [VARNISHD_ARGS...] <<VCL ... VCL
start_varnish() {
  local jail=()
  P_VARNISH=$(free_port)
  chmod 755 "$TMP"
  cat >"$TMP/varnish.vcl"
  chmod 644 "$TMP/varnish.vcl"
  if (( EUID != 0 )) || ! id varnish >/dev/null 2>&1 || ! id vcache >/dev/null 2>&1; then jail=(-j none); fi
  taskset -c 0 varnishd -F "${jail[@]}" -a "127.0.0.1:$P_VARNISH" -T "127.0.0.1:$(free_port)" \
    -f "$TMP/varnish.vcl" -s malloc,256m -n "$TMP/varnish" -p thread_pools=1 "$@" >"$TMP/varnish.log" 2>&1 &
  VPID=$!
  PIDS+=("$VPID")
}
# Exits with a hint unless every argument is an executable (the release build and examples).
need_built() {
  local f
  for f in "$@"; do
    [[ -x $f ]] || { echo "build first: cargo build --release --bins --examples ($f)" >&2; exit 1; }
  done
}

# --- Side by side: several servers on CPU 0, one at a time under wrk on CPU 1 (compression.sh,
# esi.sh, ab2009.sh). Each measurement appends a line to $TMP/results.tsv; `summarize` prints
# the medians and per-round ratios as Markdown tables.

# A process and all its descendants, one PID a line.
tree_pids() { local p; for p in "$@"; do echo "$p"; tree_pids $(pgrep -P "$p" || true); done; }
# CPU ticks of process trees (user + system of every live process, plus what each reaped of
# its dead children: Apache and PHP-FPM children come and go). Compare deltas only.
tree_ticks() {
  _tree_ticks '$14 + $15 + $16 + $17' "$@"
}
# The same, system (kernel) time only.
tree_sys_ticks() {
  _tree_ticks '$15 + $17' "$@"
}
_tree_ticks() {  # _tree_ticks AWK_SUM PID...: that sum of /proc/PID/stat fields over the trees
  local sum=$1 t=0 p v
  shift
  for p in $(tree_pids "$@"); do
    v=$(awk "{print $sum}" "/proc/$p/stat" 2>/dev/null || true)
    t=$((t + ${v:-0}))
  done
  echo "$t"
}
# Waits (at most 10 s) until URL answers anything; fails if never.
wait_http() {
  local _
  for _ in $(seq 200); do curl -s -o /dev/null "$1" && return 0; sleep 0.05; done
  echo "nothing answers $1" >&2
  return 1
}
# measure WORKLOAD SERVER ROUND URL CONNS PID... : one `wrk -t1` run of $SECS s on CPU 1 (extra
# wrk arguments from the array WRK_ARGS, e.g. a header) against URL, with the CPU of the process
# trees PID... (the server, and its PHP-FPM when it is part of the answer) measured around it.
# Appends "workload server round requests seconds MiB cpu-seconds errors load" to
# $TMP/results.tsv (load: the 1-minute load average when the run ended).
measure() {
  local w=$1 s=$2 r=$3 url=$4 conns=$5 t0 t1 k0 k1 out perf=""
  shift 5
  out="$TMP/wrk-$w-$s-$r.txt"
  t0=$(tree_ticks "$@"); k0=$(tree_sys_ticks "$@")
  # PERF=WORKLOAD:SERVER records that measurement's first process with `perf record -g`
  # (cpu-clock: a guest has no hardware counters) into $PERF_OUT (default /tmp/perf-bench.data).
  if [[ ${PERF:-} == "$w:$s" ]]; then
    perf record -e cpu-clock -F 999 -g -p "$1" -o "${PERF_OUT:-/tmp/perf-bench.data}" -- sleep "$SECS" >/dev/null 2>&1 &
    perf=$!
  fi
  timeout $((SECS + 30)) taskset -c 1 wrk -t1 -c"$conns" -d"${SECS}s" "${WRK_ARGS[@]}" "$url" >"$out" 2>&1 || true
  t1=$(tree_ticks "$@"); k1=$(tree_sys_ticks "$@")
  [[ -z $perf ]] || wait "$perf" || true
  awk -v w="$w" -v s="$s" -v r="$r" -v cpu="$(( t1 - t0 ))" -v hz="$(getconf CLK_TCK)" \
    -v load="$(cut -d' ' -f1 /proc/loadavg)" -v sys="$(( k1 - k0 ))" '
    /requests in/ { n = $1; secs = $4 + 0; v = $5; sub(/read$/, "", v)
                    u = v; gsub(/[0-9.]/, "", u); m = v + 0
                    if (u == "B") m /= 1048576; else if (u == "KB") m /= 1024
                    else if (u == "GB") m *= 1024; else if (u == "TB") m *= 1048576 }
    /Non-2xx/ { e += $NF }
    /Socket errors/ { for (i = 4; i <= NF; i += 2) { x = $i; sub(/,/, "", x); e += x } }
    END { printf "%s %s %s %d %.3f %.3f %.3f %d %s %.3f\n", w, s, r, n, secs, m, cpu / hz, e, load, sys / hz }' \
    "$out" >>"$TMP/results.tsv"
  if grep -qE 'Non-2xx|Socket errors' "$out"; then
    echo "$w $s round $r: $(grep -E 'Non-2xx|Socket errors' "$out" | tr -s ' ' | tr '\n' ' '); now: $(curl -s -o /dev/null -w '%{http_code}' "${WRK_ARGS[@]/#-H/-H}" "$url")" >&2
  fi
}
# Markdown tables from $TMP/results.tsv: per workload, per server the medians over rounds of
# req/s, MiB/s, requests and MiB per CPU-second of the server, the lowest and highest round's
# requests per CPU-second, the share of its CPU time spent in the kernel, and the ratio REF/server per CPU-second (REF = $1, e.g. shellac)
# taken round by round (each round measures every server once, close in time), as the median
# and the lowest and highest round's: one noisy round moves the median little and shows in the
# spread. The rounds' load averages are printed under each table.
summarize() {
  python3 - "$1" "$TMP/results.tsv" <<'PY'
import statistics as st, sys
ref, path = sys.argv[1], sys.argv[2]
rows = [l.split() for l in open(path) if l.strip()]
order, data, loads = [], {}, {}
kern = {}
for w, s, r, n, secs, mib, cpu, err, *rest in rows:
    if w not in order: order.append(w)
    data.setdefault(w, {}).setdefault(s, {})[r] = (int(n), float(secs), float(mib), float(cpu), int(err))
    if rest: loads.setdefault(w, []).append(float(rest[0]))
    if len(rest) > 1 and float(cpu) > 0: kern.setdefault(w, {}).setdefault(s, []).append(float(rest[1]) / float(cpu))
for w in order:
    runs = data[w]
    print(f"\n{w} ({max(len(rs) for rs in runs.values())} rounds)\n")
    print("| server | req/s | MiB/s | req per CPU-s | min–max | MiB per CPU-s | CPU use | kernel share | errors | "
          + ref + "/server per CPU-s | min–max | " + ref + "/server req/s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for s, rs in runs.items():
        rps = [n / secs for n, secs, m, c, e in rs.values() if secs]
        mbs = [m / secs for n, secs, m, c, e in rs.values() if secs]
        rpc = [n / c for n, secs, m, c, e in rs.values() if c]
        mpc = [m / c for n, secs, m, c, e in rs.values() if c]
        use = [c / secs for n, secs, m, c, e in rs.values() if secs]
        errs = sum(e for *_, e in rs.values())
        ratio = rrange = rratio = "—"
        if s != ref and ref in runs:
            q = [(runs[ref][r][0] / runs[ref][r][3]) / (n / c) for r, (n, secs, m, c, e) in rs.items()
                 if r in runs[ref] and c and n and runs[ref][r][3]]
            q2 = [(runs[ref][r][0] / runs[ref][r][1]) / (n / secs) for r, (n, secs, m, c, e) in rs.items()
                  if r in runs[ref] and n and secs and runs[ref][r][1]]
            if q:
                ratio = f"{st.median(q):.2f}×"
                rrange = f"{min(q):.2f}–{max(q):.2f}×"
            if q2: rratio = f"{st.median(q2):.2f}×"
        med = lambda v, f: format(st.median(v), f) if v else "—"
        spread = f"{min(rpc):,.0f}–{max(rpc):,.0f}" if rpc else "—"
        ks = kern.get(w, {}).get(s, [])
        print(f"| {s} | {med(rps, ',.0f')} | {med(mbs, ',.1f')} | {med(rpc, ',.0f')} | {spread} | {med(mpc, ',.1f')} | {med(use, '.2f')} | {med(ks, '.0%')} | {errs} | {ratio} | {rrange} | {rratio} |")
    if w in loads:
        print(f"\nload (1 min) during the rounds: {min(loads[w]):.1f}–{max(loads[w]):.1f}")
PY
}

# `start_php_fpm DIR PORT CHILDREN FPM`: PHP-FPM's static pool for the PHP rows (ab2009.sh,
# php_split.sh), its config, pid and logs in DIR, run as $WWW_USER on CPU 0, listening on
# 127.0.0.1:PORT. Sets FPID (for its CPU) and adds it to PIDS.
start_php_fpm() {
  local dir=$1 port=$2 children=$3 fpm=$4
  cat >"$dir/fpm.conf" <<CONF
[global]
pid = $dir/fpm.pid
error_log = $dir/error.log
daemonize = no
[bench]
user = $WWW_USER
group = $WWW_USER
listen = 127.0.0.1:$port
listen.backlog = 511
pm = static
pm.max_children = $children
pm.max_requests = 0
CONF
  taskset -c 0 "$fpm" -F -R -y "$dir/fpm.conf" 2>"$dir/stderr" &
  FPID=$!
  PIDS+=("$FPID")
}

# `start_lighttpd DIR PORT ROOT FPM_PORT FLV`: lighttpd on CPU 0 serving ROOT on 127.0.0.1:PORT
# (ab2009.sh, php_split.sh), with Debian's shipped configuration (its modules, parse options,
# index files, access rules, MIME table; $LIGHTTPD_SHIPPED, default /etc/lighttpd/lighttpd.conf)
# and this run's root, address, port and paths instead of the system's, plus mod_fastcgi for
# .php on 127.0.0.1:FPM_PORT and, with FLV=1, mod_flv_streaming when this build has it. Not
# taken from the shipped file: its upload and log directories and pid file (the system's), its
# IPv6 listener and conf-enabled/ (a javascript alias for /javascript/). Like nginx's
# keepalive_requests in ab2009.sh, max-keep-alive-requests is raised from 1,000 so that no
# server closes wrk's connections during a run (Shellac has no such limit). Its config, pid and
# logs in DIR (owned by $WWW_USER). Sets LPID (added to PIDS) and LIGHTTPD_FLV (1: FLV seeks are
# served).
start_lighttpd() {
  local dir=$1 port=$2 root=$3 fpm_port=$4 flv=$5
  local shipped=${LIGHTTPD_SHIPPED:-/etc/lighttpd/lighttpd.conf}
  lighttpd_conf() {
    grep -vE '^[[:space:]]*server\.(document-root|upload-dirs|errorlog|pid-file|username|groupname|port)[[:space:]]*=|use-ipv6\.pl|conf-enabled' \
      "$shipped"
    cat <<CONF
server.document-root = "$root"
server.bind = "127.0.0.1"
server.port = $port
server.pid-file = "$dir/pid"
server.errorlog = "$dir/error.log"
server.username = "$WWW_USER"
server.groupname = "$WWW_USER"
server.max-keep-alive-requests = 1000000
server.max-connections = 4096
server.modules += ("mod_fastcgi"$1)
fastcgi.server = (".php" => (("host" => "127.0.0.1", "port" => $fpm_port, "check-local" => "enable")))
$2
CONF
  }
  LIGHTTPD_FLV=0
  if (( flv )); then
    lighttpd_conf ', "mod_flv_streaming"' 'flv-streaming.extensions = (".flv")' >"$dir/lighttpd.conf"
    lighttpd -tt -f "$dir/lighttpd.conf" >/dev/null 2>&1 && LIGHTTPD_FLV=1
  fi
  (( LIGHTTPD_FLV )) || lighttpd_conf '' '' >"$dir/lighttpd.conf"
  chown -R "$WWW_USER" "$dir" 2>/dev/null || true
  taskset -c 0 lighttpd -D -f "$dir/lighttpd.conf" 2>"$dir/stderr" &
  LPID=$!
  PIDS+=("$LPID")
}

# start_nginx_files DIR PORT ROOT: nginx (one worker) serving ROOT on 127.0.0.1:PORT with
# `expires 1h`, logging each response's body bytes to DIR/bytes.log (origin bytes sent), its
# config and temporary files in DIR; added to PIDS.
start_nginx_files() {
  local dir=$1 port=$2 root=$3
  cat >"$dir/nginx.conf" <<CONF
daemon off;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log;
events { worker_connections 256; }
http {
  access_log off;
  log_format bytes '\$body_bytes_sent';
  client_body_temp_path $dir;
  proxy_temp_path $dir;
  fastcgi_temp_path $dir;
  uwsgi_temp_path $dir;
  scgi_temp_path $dir;
  server {
    listen 127.0.0.1:$port;
    root $root;
    access_log $dir/bytes.log bytes;
    expires 1h;
  }
}
CONF
  nginx -c "$dir/nginx.conf" -p "$dir" 2>"$dir/stderr" &
  PIDS+=($!)
}

# `ab2009_shellac_config FILE PORT ADMIN ROOT FPM_PORT CHILDREN ARMOR`: issue 31's Shellac for
# the 2009 rows (ab2009.sh, hit_instructions.sh): one thread, a files backend on ROOT, PHP-FPM
# on FPM_PORT (CHILDREN connections) behind a fastcgi backend, the `/cached/` rule, `.flv`
# seeks; `cache.deception_armor = ARMOR`.
ab2009_shellac_config() {
  cat >"$1" <<CONF
[server]
listen = ["127.0.0.1:$2"]
admin = "127.0.0.1:$3"
threads = 1

[cache]
memory_size = "256MiB"
# The cache deception armor (on by default) refuses a rule's ttl for an HTML answer to a URL
# ending in an extension it does not know (.php): without this line "/cached/" stays uncached
# (bench/RESULTS.md, ab2009).
deception_armor = $7

[[backend]]
name = "static"
protocol = "files"
root = "$4"

[[backend]]
name = "php"
protocol = "fastcgi"
host = "127.0.0.1"
port = $5
root = "$4"
max_connections = $6
# Above the default 64: the build measured leaks a queue place per waiter whose client leaves
# (each wrk run's end), and after two runs every waiter was refused (bench/RESULTS.md, ab2009).
max_queue = 4096

[routing]
default = "static"

[[rule]]
name = "php"
path = '\.php\$'
director = "php"

[[rule]]
name = "cached php"
path = '^/cached/'
ttl = "1h"

[[rule]]
name = "flv"
path = '\.flv\$'
flv = true
CONF
}
