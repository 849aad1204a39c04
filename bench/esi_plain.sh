#!/usr/bin/env bash
# A page marked for ESI that holds no ESI markup, sent gzip by its origin (issue 29): its hits
# must cost what the same page not marked costs. One Shellac on CPU 0 (one worker thread),
# wrk and the origin (python, the 72 KiB page of bench/page72k.py gzipped) on CPU 1; /marked
# and /plain are the same bytes, a rule turns ESI on for /marked only. Each round measures
# both paths for a gzip client and for an identity client (wrk sends no Accept-Encoding);
# prints requests per CPU-second of Shellac per path, and plain/marked per CPU-second.
#
#   cargo build --release && bench/prio.sh bench/esi_plain.sh   # ROUNDS=3 SECS=4 CONNS=10
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SHELLAC=${SHELLAC:-target/release/shellac}
ROUNDS=${ROUNDS:-3}
SECS=${SECS:-4}
CONNS=${CONNS:-10}
. bench/lib.sh
need_built "$SHELLAC"
need_tools wrk

python3 bench/page72k.py "$TMP/page.html"
gzip -6 -n -c "$TMP/page.html" >"$TMP/page.html.gz"
ORIGIN_PORT=$(free_port)
taskset -c 1 python3 - "$ORIGIN_PORT" "$TMP/page.html.gz" <<'PY' &
import http.server, socketserver, sys
body = open(sys.argv[2], "rb").read()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        self.send_response(200)
        for k, v in (("content-type", "text/html"), ("content-encoding", "gzip"),
                     ("vary", "Accept-Encoding"), ("cache-control", "max-age=3600"),
                     ("content-length", str(len(body)))):
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer): daemon_threads = True
S(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
PIDS+=($!)
read -r P_SHELLAC _ SPID < <(start_shellac "$SHELLAC" '
[[rule]]
name = "esi"
path = "^/marked$"
esi = true')
PIDS+=("$SPID")
wait_http "http://127.0.0.1:$ORIGIN_PORT/plain"
wait_http "http://127.0.0.1:$P_SHELLAC/plain"
for p in marked plain; do
  for _ in 1 2; do curl -s -o /dev/null "http://127.0.0.1:$P_SHELLAC/$p"; done
  wait_for_hit "$P_SHELLAC" "$p"
  curl -s --compressed -o "$TMP/$p.out" "http://127.0.0.1:$P_SHELLAC/$p"
  cmp -s "$TMP/$p.out" "$TMP/page.html" || { echo "/$p is not the page" >&2; exit 1; }
done
for p in marked plain; do
  echo "/$p gzip: $(curl -s -H 'accept-encoding: gzip' -D - -o /dev/null "http://127.0.0.1:$P_SHELLAC/$p" | grep -iE '^(cache-status|content-encoding|content-length):' | tr -d '\r' | tr '\n' ' ')"
done
: >"$TMP/results.tsv"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
  for p in marked plain; do
    WRK_ARGS=(-H "Accept-Encoding: gzip")
    measure "gzip-client" "$p" "$r" "http://127.0.0.1:$P_SHELLAC/$p" "$CONNS" "$SPID"
    WRK_ARGS=()
    measure "identity-client" "$p" "$r" "http://127.0.0.1:$P_SHELLAC/$p" "$CONNS" "$SPID"
  done
done
echo "$ROUNDS rounds of ${SECS}s, $CONNS connections; load after: $(cut -d' ' -f1-3 /proc/loadavg)"
summarize plain
