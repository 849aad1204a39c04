#!/usr/bin/env bash
# Issue 29's ESI goals, Shellac against Varnish 7.1 in one run, both on CPU 0 (one at a time;
# wrk / curl and the origin, bench/esi_origin.py, on CPU 1):
#   1. a page with 10 cached includes (every part a hit): requests per CPU-second, goal
#      >= 1.2x Varnish (identity clients: wrk sends no Accept-Encoding);
#   2. a page (cached) with 10 uncached includes, each answered after 50 ms by the origin:
#      the page's time against one fragment's through the same server (curl, SAMPLES each,
#      medians): goal <= 1.5x; Varnish fetches includes one after another (~10x).
# Shellac turns ESI on with a rule (`esi = true`), Varnish with `beresp.do_esi`.
#
#   cargo build --release && bench/prio.sh bench/esi.sh   # ROUNDS=5 SECS=5 CONNS=50 SAMPLES=20
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SHELLAC=${SHELLAC:-target/release/shellac}
ROUNDS=${ROUNDS:-5}
SECS=${SECS:-5}
CONNS=${CONNS:-50}
SAMPLES=${SAMPLES:-20}
# Shellac gzips the 1 KB text/html fragments at fetch (its default) and decodes each for its
# include; FRAGMENTS_IDENTITY=1 adds a rule `compress = false` for /frag/ (stored as sent).
FRAGMENTS_IDENTITY=${FRAGMENTS_IDENTITY:-0}
FRAG_RULE=""
(( FRAGMENTS_IDENTITY )) && FRAG_RULE=$'\n\n[[rule]]\nname = "fragments identity"\npath = "^/frag/"\ncompress = false'
. bench/lib.sh
need_built "$SHELLAC"
need_tools varnishd wrk

P_ORIGIN=$(free_port)
taskset -c 1 python3 bench/esi_origin.py "127.0.0.1:$P_ORIGIN" &
PIDS+=($!)
start_varnish <<VCL
vcl 4.1;
backend origin { .host = "127.0.0.1"; .port = "$P_ORIGIN"; }
sub vcl_backend_response {
  if (bereq.url ~ "^/(page|slowpage)$") { set beresp.do_esi = true; }
}
VCL
ORIGIN_PORT=$P_ORIGIN
read -r P_SHELLAC _ SPID < <(start_shellac "$SHELLAC" '
[cache]
memory_size = "256MiB"

[[rule]]
name = "esi pages"
path = "^/(page|slowpage)$"
esi = true'"$FRAG_RULE")
PIDS+=("$SPID")
for p in "$P_ORIGIN" "$P_VARNISH" "$P_SHELLAC"; do wait_http "http://127.0.0.1:$p/frag/1"; done

# The assembled pages must be the same bytes from both, and have every fragment in them.
for p in "$P_VARNISH" "$P_SHELLAC"; do
  for _ in 1 2 3; do curl -s -o /dev/null "http://127.0.0.1:$p/page"; done
done
curl -s "http://127.0.0.1:$P_VARNISH/page" >"$TMP/page.varnish"
curl -s "http://127.0.0.1:$P_SHELLAC/page" >"$TMP/page.shellac"
cmp -s "$TMP/page.varnish" "$TMP/page.shellac" || { echo "the assembled pages differ" >&2; diff <(tr '>' '\n' <"$TMP/page.varnish") <(tr '>' '\n' <"$TMP/page.shellac") | head >&2; exit 1; }
[[ $(grep -o 'class="box"' "$TMP/page.shellac" | wc -l) == 10 ]] || { echo "the page lacks fragments" >&2; exit 1; }
echo "assembled page: $(wc -c <"$TMP/page.shellac") bytes, 10 fragments, same bytes from both"
echo "shellac: $(curl -s -D - -o /dev/null "http://127.0.0.1:$P_SHELLAC/page" | grep -iE '^(cache-status|cache-control):' | tr -d '\r' | tr '\n' ' ')"

# 1. Cached includes: req per CPU-second.
WRK_ARGS=()
SECS_MAIN=$SECS; SECS=2
measure warm shellac 0 "http://127.0.0.1:$P_SHELLAC/page" "$CONNS" "$SPID"
measure warm varnish 0 "http://127.0.0.1:$P_VARNISH/page" "$CONNS" "$VPID"
SECS=$SECS_MAIN
: >"$TMP/results.tsv"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
  measure "page-10-cached-includes" shellac "$r" "http://127.0.0.1:$P_SHELLAC/page" "$CONNS" "$SPID"
  measure "page-10-cached-includes" varnish "$r" "http://127.0.0.1:$P_VARNISH/page" "$CONNS" "$VPID"
done
echo "$ROUNDS rounds of ${SECS}s, $CONNS connections; load after: $(cut -d' ' -f1-3 /proc/loadavg)"
summarize shellac

# 2. Uncached includes of 50 ms: page time against one fragment's, through each server.
# timings PORT PATH -> the median of SAMPLES sequential curl times (total and first byte, ms)
timings() {
  local i
  for i in $(seq "$SAMPLES"); do
    timeout 30 taskset -c 1 curl -s -o /dev/null -w '%{time_total} %{time_starttransfer}\n' "http://127.0.0.1:$1$2"
  done | python3 -c '
import statistics as st, sys
t = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
print("%.1f %.1f" % (st.median(x[0] for x in t) * 1000, st.median(x[1] for x in t) * 1000))'
}
for p in "$P_VARNISH" "$P_SHELLAC"; do curl -s -o /dev/null "http://127.0.0.1:$p/slowpage"; done
slow=$(curl -s "http://127.0.0.1:$P_SHELLAC/slowpage" | grep -o 'class="box"' | wc -l)
[[ $slow == 10 ]] || { echo "the slow page lacks fragments ($slow)" >&2; exit 1; }
echo
echo "| server | page with 10 uncached 50 ms includes: total ms (first byte) | one fragment: total ms | page / fragment |"
echo "|---|---|---|---|"
for s in varnish:$P_VARNISH shellac:$P_SHELLAC; do
  IFS=: read -r name port <<<"$s"
  read -r pt pf < <(timings "$port" /slowpage)
  read -r ft _ < <(timings "$port" /slow/1)
  echo "| $name | $pt ($pf) | $ft | $(python3 -c "print('%.2f×' % ($pt / $ft))") |"
done
echo "($SAMPLES sequential requests each, medians; the page itself is a hit)"
