#!/usr/bin/env bash
# Where one Shellac build's CPU goes per cache hit, for the kernel side of a send
# (bench/RESULTS.md, "twelfth stop: send"): the build on CPU 0 (one worker thread, lib.sh
# `start_shellac`) in front of bench/origin.rs, the hit /OBJECT warmed, then `wrk -t1 -c50` on
# CPU 1 for SECS s while one of these watches the server's process:
#   cpu     (default) user and system µs per request and requests per CPU-second (/proc/PID/stat)
#   strace  `strace -c -f`: system calls per request (OUT.strace)
#   perf    `perf record -F 5000 -g` (OUT.perf.data; kernel ns per request = samples × 200 µs
#           / requests, `perf report --sort dso`)
#   trace   tracepoints timer:hrtimer_start, timer:timer_start, irq:softirq_entry (OUT.trace.data;
#           e.g. `perf script -i OUT.trace.data | grep -c tcp_pace_kick`: responses whose second
#           segment waited for TCP's pacing timer)
# OUT (/tmp/hit_kernel) prefixes the output files. Prints the requests, µs per request and the copy-free counters after the run.
#
#   bench/prio.sh bench/hit_kernel.sh target/release/shellac sized/69478 perf
#   OUT=/tmp/b SECS=3 bench/prio.sh bench/hit_kernel.sh /tmp/shellac.b sized/69478 trace
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BIN=${1:?usage: bench/hit_kernel.sh BINARY OBJECT [cpu|strace|perf|trace]}
OBJECT=${2:?usage: bench/hit_kernel.sh BINARY OBJECT [cpu|strace|perf|trace]}
WHAT=${3:-cpu}
SECS=${SECS:-4}
ORIGIN=${ORIGIN:-target/release/examples/origin}
. bench/lib.sh
need_built "$BIN" "$ORIGIN"
OUT=${OUT:-/tmp/hit_kernel}   # outside $TMP, which goes at exit
start_origin "$ORIGIN"
read -r port admin pid < <(start_shellac "$BIN")
PIDS+=("$pid")
wait_for_hit "$port" "$OBJECT"
taskset -c 1 wrk -t1 -c50 -d1s "http://127.0.0.1:$port/$OBJECT" >/dev/null
watcher=
case $WHAT in
  cpu) ;;
  strace) strace -c -f -p "$pid" -o "$OUT.strace" & watcher=$! ;;
  perf) perf record -F 5000 -g -p "$pid" -o "$OUT.perf.data" 2>/dev/null & watcher=$! ;;
  trace) perf record -e timer:hrtimer_start -e timer:timer_start -e irq:softirq_entry \
           -p "$pid" -o "$OUT.trace.data" 2>/dev/null & watcher=$! ;;
  *) echo "unknown: $WHAT (cpu, strace, perf, trace)" >&2; exit 2 ;;
esac
[[ -z $watcher ]] || sleep 0.5
read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$pid/stat")
out=$(taskset -c 1 wrk -t1 -c50 -d"${SECS}s" "http://127.0.0.1:$port/$OBJECT")
read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$pid/stat")
if [[ -n $watcher ]]; then kill -INT "$watcher"; wait "$watcher" 2>/dev/null || true; fi
req=$(awk '/requests in/{print $1}' <<<"$out")
hz=$(getconf CLK_TCK)
awk -v r="$req" -v u=$((u1 - u0)) -v s=$((s1 - s0)) -v hz="$hz" 'BEGIN {
  printf "requests %d, user %.2f µs, system %.2f µs per request, %.0f req per CPU-s\n",
    r, u / hz * 1e6 / r, s / hz * 1e6 / r, r / ((u + s) / hz) }'
curl -s "http://127.0.0.1:$admin/stats" | grep -E '"(splice_bytes|splice_fallback|cache_hit_fast)"' || true
case $WHAT in strace) echo "output: $OUT.strace" ;; perf|trace) echo "output: $OUT.$WHAT.data" ;; esac
