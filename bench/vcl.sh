#!/usr/bin/env bash
# Hits under a typical 4.x VCL (bench/typical.vcl: URL normalisation, cookie stripping, a few
# regexes in vcl_recv, headers in vcl_deliver), paired at equal CPU (as bench/ab_paired.sh):
#   1. Shellac without VCL (A) against the same binary with `--vcl typical.vcl` (B): A/B is
#      the share of its VCL-less hit throughput Shellac keeps under the VCL (goal: >= 90%);
#   2. Varnish (`varnishd`, the same VCL, malloc storage) (A) against Shellac with the VCL (B):
#      A/B above 100% means Shellac does a hit for less CPU than Varnish.
# Both servers of a pair run at once on CPU 0, each driven by its own wrk on CPU 1.
#   cargo build --release --bins --examples && bench/vcl.sh
#   OBJECT=small100 CONNS=200 RUNS=7 bench/vcl.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SHELLAC=${SHELLAC:-target/release/shellac}
OBJECT=${OBJECT:-hit6k}
CONNS=${CONNS:-50}
SECS=${SECS:-6}
RUNS=${RUNS:-5}
ORIGIN=${ORIGIN:-target/release/examples/origin}
command -v wrk >/dev/null || { echo "needs wrk (apt-get install wrk)" >&2; exit 1; }
. bench/lib.sh
need_built "$SHELLAC" "$ORIGIN"
start_origin "$ORIGIN"
sed "s/ORIGIN_PORT/$ORIGIN_PORT/" bench/typical.vcl >"$TMP/typical.vcl"
chmod 644 "$TMP/typical.vcl"

# Starts Shellac with the VCL on CPU 0, one worker thread; prints "port admin pid".
start_shellac_vcl() {
  local port admin
  port=$(free_port); admin=$(free_port)
  printf '[server]\nlisten = ["127.0.0.1:%s"]\nadmin = "127.0.0.1:%s"\nthreads = 1\n\n[vcl]\nfile = "%s"\n' \
    "$port" "$admin" "$TMP/typical.vcl" >"$TMP/shellac-vcl-$port.toml"
  taskset -c 0 "$SHELLAC" serve --config "$TMP/shellac-vcl-$port.toml" 2>"$TMP/shellac-vcl-$port.err" &
  echo "$port $admin $!"
}

# Waits until /$OBJECT on PORT is served from the cache (X-Cache: HIT or a Shellac hit).
warm() {
  local _
  for _ in $(seq 200); do
    curl -s -D - -o /dev/null "http://127.0.0.1:$1/$OBJECT" 2>/dev/null \
      | grep -qiE '^(x-cache: HIT|cache-status: shellac; hit)' && return 0
    sleep 0.05
  done
  echo "no cache hit on port $1 for /$OBJECT" >&2
  return 1
}

# The varnishd child (the process that serves): its CPU is what a request costs.
varnish_child() {
  local _ c
  for _ in $(seq 100); do
    c=$(pgrep -P "$1" | head -n1 || true)
    [[ -n $c ]] && { echo "$c"; return 0; }
    sleep 0.05
  done
  echo "varnishd started no child" >&2
  return 1
}

vcl_ratios=()
varnish_ratios=()
for run in $(seq "$RUNS"); do
  read -r port_a _ pid_a < <(start_shellac "$SHELLAC")
  read -r port_b _ pid_b < <(start_shellac_vcl)
  PIDS+=("$pid_a" "$pid_b")
  wait_for_hit "$port_a" "$OBJECT"
  warm "$port_b"
  read -r req_a us_a req_b us_b ratio < <(paired_cpu "$pid_a" "$port_a" "$pid_b" "$port_b" 1)
  printf 'run %s: no VCL %9s req %6s µs/req | VCL %9s req %6s µs/req | share kept %5s%%\n' \
    "$run" "$req_a" "$us_a" "$req_b" "$us_b" "$ratio" >&2
  vcl_ratios+=("$ratio")

  if command -v varnishd >/dev/null; then
    port_v=$(free_port); admin_v=$(free_port)
    taskset -c 0 varnishd -F -j none -a "127.0.0.1:$port_v" -T "127.0.0.1:$admin_v" \
      -f "$TMP/typical.vcl" -s malloc,256m -n "$TMP/varnish-$run" -p thread_pools=1 \
      >"$TMP/varnish-$run.log" 2>&1 &
    pid_vm=$!
    PIDS+=("$pid_vm")
    read -r port_b _ pid_b < <(start_shellac_vcl)
    PIDS+=("$pid_b")
    warm "$port_v"
    warm "$port_b"
    # After the warm-up: the manager's first children compile the VCL and exit.
    pid_v=$(varnish_child "$pid_vm")
    if ! read -r req_a us_a req_b us_b ratio < <(paired_cpu "$pid_v" "$port_v" "$pid_b" "$port_b" 1); then
      echo "run $run: the Varnish pair did not complete (see $TMP/varnish-$run.log); skipped" >&2
      kill -TERM "$pid_vm" "$pid_b" 2>/dev/null; wait "$pid_vm" 2>/dev/null || true
      continue
    fi
    kill -TERM "$pid_vm" 2>/dev/null; wait "$pid_vm" 2>/dev/null || true
    printf 'run %s: Varnish %9s req %6s µs/req | Shellac+VCL %9s req %6s µs/req | Varnish/Shellac CPU %5s%%\n' \
      "$run" "$req_a" "$us_a" "$req_b" "$us_b" "$ratio" >&2
    varnish_ratios+=("$ratio")
  fi
done
echo "/$OBJECT, $CONNS connections each, ${SECS}s x $RUNS: median share of VCL-less hit throughput kept under typical.vcl = $(median "${vcl_ratios[@]}")%"
if (( ${#varnish_ratios[@]} )); then
  echo "median Varnish/Shellac CPU per hit, both running typical.vcl = $(median "${varnish_ratios[@]}")% (above 100%: Shellac is cheaper)"
fi
