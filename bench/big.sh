#!/usr/bin/env bash
# The 21 MB hit (workload 5) with CONNS connections, Shellac against Varnish on the same
# pinned core (CPU 0; wrk and the origin on CPU 1), alternating ROUNDS short runs of each so
# the machine's drift falls on both alike. Prints MiB/s per run and, what a busy machine
# disturbs least, MiB sent per CPU-second of each server (user + system, all its threads and,
# for Varnish, its child process), with the median ratios.
#
#   cargo build --release --bins --examples
#   bench/big.sh                          # CONNS=10 SECS=5 ROUNDS=5
#   SHELLAC=path/to/other/shellac bench/big.sh
#   SHELLAC_B=/tmp/shellac.before bench/big.sh   # a second Shellac binary instead of Varnish
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CONNS=${CONNS:-10}
SECS=${SECS:-5}
ROUNDS=${ROUNDS:-5}
SHELLAC=${SHELLAC:-target/release/shellac}
ORIGIN=${ORIGIN:-target/release/examples/origin}
. bench/lib.sh
SHELLAC_B=${SHELLAC_B:-}
[[ -n $SHELLAC_B ]] || command -v varnishd >/dev/null || { echo "needs varnishd (apt-get install varnish)" >&2; exit 1; }
B_NAME=${SHELLAC_B:+shellac-b}
B_NAME=${B_NAME:-varnish}
P_ORIGIN=$(free_port); P_SHELLAC=$(free_port); P_ADMIN=$(free_port); P_VARNISH=$(free_port); P_VADMIN=$(free_port)
taskset -c 1 "$ORIGIN" "127.0.0.1:$P_ORIGIN" >/dev/null 2>&1 &
PIDS+=($!)
printf '[server]\nlisten = ["127.0.0.1:%s"]\nadmin = "127.0.0.1:%s"\n\n[cache]\nmemory_size = "256MiB"\n\n[[backend]]\nhost = "127.0.0.1"\nport = %s\n' \
  "$P_SHELLAC" "$P_ADMIN" "$P_ORIGIN" >"$TMP/shellac.toml"
taskset -c 0 "$SHELLAC" serve --config "$TMP/shellac.toml" 2>"$TMP/shellac.err" &
SPID=$!
PIDS+=("$SPID")
if [[ -n $SHELLAC_B ]]; then
  printf '[server]\nlisten = ["127.0.0.1:%s"]\nadmin = "127.0.0.1:%s"\n\n[cache]\nmemory_size = "256MiB"\n\n[[backend]]\nhost = "127.0.0.1"\nport = %s\n' \
    "$P_VARNISH" "$P_VADMIN" "$P_ORIGIN" >"$TMP/shellac-b.toml"
  taskset -c 0 "$SHELLAC_B" serve --config "$TMP/shellac-b.toml" 2>"$TMP/shellac-b.err" &
  VPID=$!
  PIDS+=("$VPID")
else
  chmod 755 "$TMP"
  printf 'vcl 4.1;\nbackend origin { .host = "127.0.0.1"; .port = "%s"; }\n' "$P_ORIGIN" >"$TMP/bench.vcl"
  chmod 644 "$TMP/bench.vcl"
  JAIL=()
  if (( EUID != 0 )) || ! id varnish >/dev/null 2>&1 || ! id vcache >/dev/null 2>&1; then JAIL=(-j none); fi
  taskset -c 0 varnishd -F "${JAIL[@]}" -a "127.0.0.1:$P_VARNISH" -T "127.0.0.1:$P_VADMIN" \
    -f "$TMP/bench.vcl" -s malloc,256m -n "$TMP/varnish" >"$TMP/varnish.log" 2>&1 &
  VPID=$!
  PIDS+=("$VPID")
fi
for port in "$P_ORIGIN" "$P_SHELLAC" "$P_VARNISH"; do
  for _ in $(seq 200); do curl -s -o /dev/null "http://127.0.0.1:$port/big21m" && break; sleep 0.05; done
done
# Warm both caches.
for port in "$P_SHELLAC" "$P_VARNISH"; do
  for _ in 1 2 3; do curl -s -o /dev/null "http://127.0.0.1:$port/big21m"; done
done
mibs() {  # wrk output → MiB/s
  awk '/Transfer\/sec/ {v=$2; u=substr(v, length(v)-1); n=substr(v, 1, length(v)-2);
       if (u=="GB") n*=1024; if (u=="KB") n/=1024; print n}' "$1"
}
# CPU ticks of a process and its children (Varnish's worker is the manager's child).
ticks() { local t; t=$(cpu_ticks "$1"); for c in $(pgrep -P "$1" || true); do t=$((t + $(cpu_ticks "$c"))); done; echo "$t"; }
run() {  # run PORT PID OUT → prints "MiB/s MiB-per-CPU-second"
  local t0 t1 mb
  t0=$(ticks "$2")
  timeout $((SECS + 30)) taskset -c 1 wrk -t1 -c"$CONNS" -d"${SECS}s" "http://127.0.0.1:$1/big21m" >"$3"
  t1=$(ticks "$2")
  mb=$(mibs "$3")
  python3 -c "print($mb, round($mb * $SECS / max(1, $t1 - $t0) * $(getconf CLK_TCK), 1))"
}
ratios=(); cpu_ratios=()
for r in $(seq "$ROUNDS"); do
  read -r s scpu < <(run "$P_SHELLAC" "$SPID" "$TMP/s.txt")
  read -r v vcpu < <(run "$P_VARNISH" "$VPID" "$TMP/v.txt")
  ratios+=("$(python3 -c "print(round($s / $v, 3))")")
  cpu_ratios+=("$(python3 -c "print(round($scpu / $vcpu, 3))")")
  echo "round $r: shellac $s MiB/s ($scpu MiB per CPU-s), $B_NAME $v MiB/s ($vcpu MiB per CPU-s)"
done
echo "median shellac/$B_NAME: MiB/s $(median "${ratios[@]}"), MiB per CPU-second $(median "${cpu_ratios[@]}")"
