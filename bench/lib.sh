# Shared by the bench scripts (sourced, not run): a temporary directory and the PIDs of
# everything the script starts, both cleaned up on exit, a free loopback port, and the helpers
# the paired measurements share (start the origin and Shellac, CPU time of a process, median,
# waiting for a hit, two wrks at once).
TMP=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$TMP"; }
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
# Exits with a hint unless every argument is an executable (the release build and examples).
need_built() {
  local f
  for f in "$@"; do
    [[ -x $f ]] || { echo "build first: cargo build --release --bins --examples ($f)" >&2; exit 1; }
  done
}
