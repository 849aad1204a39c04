#!/usr/bin/env bash
# Access-log cost measured in pairs: two Shellac instances run *at the same time* on CPU 0, one
# with the access log off and one with it on (MODE: combined or json, to a file), each driven
# by its own wrk on CPU 1 (a cached object, 100 bytes unless OBJECT says otherwise; CONNS
# keep-alive connections each, 200 by default as in issue 6's goal). Both see the same machine at the same moment, so a virtual machine whose speed drifts between
# runs (bench/access_log.sh runs the modes one after the other) affects them alike. Reported:
# each instance's own CPU time per request (user + system, all its threads, the log writer
# included) and off/on = the requests the logged instance keeps at equal CPU.
#
#   cargo build --release --bins --examples && bench/access_log_paired.sh
#   RUNS=7 SECS=8 MODE=json bench/access_log_paired.sh
#   OBJECT=hit6k bench/access_log_paired.sh     # the 6.3 KB object of bench/run.sh workload 1
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
MODE=${MODE:-combined}
RUNS=${RUNS:-5}
SECS=${SECS:-8}
CONNS=${CONNS:-200}
OBJECT=${OBJECT:-small100}
SHELLAC=${SHELLAC:-target/release/shellac}
ORIGIN=${ORIGIN:-target/release/examples/origin}
command -v wrk >/dev/null || { echo "needs wrk (apt-get install wrk)" >&2; exit 1; }

. bench/lib.sh   # TMP, PIDS (stopped on exit), free_port, start_origin, start_shellac, cpu_ticks, ...
need_built "$SHELLAC" "$ORIGIN"

start_origin "$ORIGIN"

ratios=()
for run in $(seq "$RUNS"); do
  read -r port_off _ pid_off < <(start_shellac "$SHELLAC" '[log]
access_log = "off"')
  read -r port_on _ pid_on < <(start_shellac "$SHELLAC" "[log]
access_log = \"$TMP/access.log\"
format = \"$MODE\"")
  PIDS+=("$pid_off" "$pid_on")
  wait_for_hit "$port_off" "$OBJECT"; wait_for_hit "$port_on" "$OBJECT"
  read -r req_off us_off req_on us_on ratio < <(paired_cpu "$pid_off" "$port_off" "$pid_on" "$port_on" 2)
  lines=$(wc -l < "$TMP/access.log"); rm -f "$TMP/access.log"
  printf 'run %s: off %9s req %6s µs CPU/request | %-8s %9s req %6s µs CPU/request (%s log lines) | off/on %5s%%\n' \
    "$run" "$req_off" "$us_off" "$MODE" "$req_on" "$us_on" "$lines" "$ratio" >&2
  ratios+=("$ratio")
done
median=$(median "${ratios[@]}")
echo "access log ($MODE) paired with log off on one core, /$OBJECT, $CONNS connections each, ${SECS}s x $RUNS: median off/on CPU per request = $median% (goal >= 95%)"
