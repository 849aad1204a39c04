#!/usr/bin/env bash
# Issue 31's big-media goal: a range-seek workload over a 2 GB file above max_object_size —
# origin bytes per client byte <= 1.1. nginx serves a sparse 2 GB file (created in the temp
# dir, removed on exit) with `expires 1h`; Shellac in front slices it (`[cache] slice`,
# docs/slices.md). VIEWERS viewers each seek to a pseudo-random offset (every REPEAT-th one
# to where an earlier viewer seeked: popular chapters; REPEAT=0 never) and read READ_MIB MiB
# on in 2 MiB Range requests, as a player does (RANGES=open: `bytes=a-` requests the client
# drops after 2 MiB, as a browser's player does). SLICING=false runs the same without slices.
# Origin bytes are nginx's `$body_bytes_sent` summed from its
# access log; client bytes are curl's `size_download`. Bounded: VIEWERS x READ_MIB MiB.
#
#   cargo build --release --bins
#   bench/slices.sh                       # VIEWERS=32 READ_MIB=16 SLICE=1MiB REPEAT=3
#   REPEAT=0 bench/slices.sh              # every seek somewhere new
#   SHELLAC=target/debug/shellac VIEWERS=8 bench/slices.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SHELLAC=${SHELLAC:-target/release/shellac}
VIEWERS=${VIEWERS:-32}
READ_MIB=${READ_MIB:-16}
SLICE=${SLICE:-1MiB}
SLICING=${SLICING:-true}
RANGES=${RANGES:-closed}
REPEAT=${REPEAT:-3}   # every REPEAT-th viewer seeks where an earlier one did; 0: never
SIZE=$((2 * 1024 * 1024 * 1024))
. bench/lib.sh
need_built "$SHELLAC"
command -v nginx >/dev/null || { echo "needs nginx (apt-get install nginx)" >&2; exit 1; }
(( VIEWERS >= 1 && VIEWERS <= 256 && READ_MIB >= 1 && READ_MIB <= 256 )) \
  || { echo "VIEWERS 1-256, READ_MIB 1-256" >&2; exit 1; }

mkdir -p "$TMP/www" "$TMP/nginx"
# nginx's workers run as an unprivileged user: they must reach the document root.
chmod 755 "$TMP" "$TMP/www"
# Sparse: no disk space, reads of zeros. Its modification time is set in the past so the
# validator is a strong Last-Modified as well as the ETag.
truncate -s "$SIZE" "$TMP/www/movie.mp4"
touch -d '2022-01-01 00:00:00' "$TMP/www/movie.mp4"

P_NGINX=$(free_port); P_SHELLAC=$(free_port); P_ADMIN=$(free_port)
start_nginx_files "$TMP/nginx" "$P_NGINX" "$TMP/www"
printf '[server]\nlisten = ["127.0.0.1:%s"]\nadmin = "127.0.0.1:%s"\n\n[cache]\nmemory_size = "1GiB"\nmax_object_size = "64MiB"\nslice = %s\nslice_size = "%s"\n\n[[backend]]\nhost = "127.0.0.1"\nport = %s\n' \
  "$P_SHELLAC" "$P_ADMIN" "$SLICING" "$SLICE" "$P_NGINX" >"$TMP/shellac.toml"
"$SHELLAC" serve --config "$TMP/shellac.toml" 2>"$TMP/shellac.err" &
PIDS+=($!)
for _ in $(seq 100); do
  curl -s -o /dev/null "http://127.0.0.1:$P_ADMIN/stats" && curl -s -o /dev/null "http://127.0.0.1:$P_NGINX/" && break
  sleep 0.1
done

MIB=$((1024 * 1024))
STEP=$((2 * MIB))
client=0
requests=0
seeks=()
x=12345
for v in $(seq 1 "$VIEWERS"); do
  x=$(( (x * 1103515245 + 12345) % 2147483648 ))
  if (( REPEAT > 0 && v % REPEAT == 0 && ${#seeks[@]} > 0 )); then
    seek=${seeks[$(( x % ${#seeks[@]} ))]}
  else
    seek=$(( (x * 97) % (SIZE - READ_MIB * MIB) ))
    seeks+=("$seek")
  fi
  at=$seek
  end=$(( seek + READ_MIB * MIB - 1 ))
  while (( at <= end )); do
    last=$(( at + STEP - 1 < end ? at + STEP - 1 : end ))
    if [[ $RANGES == open ]]; then
      got=$( (curl -s -H "Range: bytes=$at-" "http://127.0.0.1:$P_SHELLAC/movie.mp4" || true) \
        | head -c $(( last - at + 1 )) | wc -c)
    else
      got=$(curl -s -o /dev/null -w '%{size_download}' -H "Range: bytes=$at-$last" \
        "http://127.0.0.1:$P_SHELLAC/movie.mp4")
    fi
    client=$(( client + got ))
    requests=$(( requests + 1 ))
    at=$(( last + 1 ))
  done
done
sleep 0.5
origin=$(awk '{s += $1} END {print s + 0}' "$TMP/nginx/bytes.log")
origin_requests=$(wc -l <"$TMP/nginx/bytes.log")
stats=$(curl -s "http://127.0.0.1:$P_ADMIN/stats")
pick() { python3 -c "import json,sys; print(json.load(sys.stdin).get('$1', 0))" <<<"$stats"; }
printf 'viewers %d (every %d-th seeking where another did), %d MiB read each in 2 MiB %s ranges, slicing %s, slice %s, file 2 GiB\n' "$VIEWERS" "$REPEAT" "$READ_MIB" "$RANGES" "$SLICING" "$SLICE"
printf 'client requests %d, client bytes %d\n' "$requests" "$client"
printf 'origin requests %d, origin bytes %d\n' "$origin_requests" "$origin"
printf 'slices: fetched %s, hit %s, learnt %s\n' "$(pick slice_fetch)" "$(pick slice_hit)" "$(pick slice_learnt)"
python3 -c "print('origin bytes per client byte: %.3f' % ($origin / max($client, 1)))"
