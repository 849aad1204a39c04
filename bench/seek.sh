#!/usr/bin/env bash
# Issue 31: what a seek (`?start=`, an mp4 or flv rule) on a big file cached in slices costs,
# against a plain Range request for as many bytes. nginx serves a 2 GiB MP4 written as a
# sparse file (bench/seek_movie.rs: the sample movie, fast start, its samples SCALE times their
# small size at the file's end after a hole) in the temp dir (removed on exit), under three
# names: /seek.mp4 (MP4 seeks), /clip.flv (FLV seeks: the 13-byte header, then the file from a
# byte) and /plain.mp4 (plain Range requests). Shellac in front caches it in slices
# (max_object_size 64MiB, SLICE slices). Each URL is learnt first by one Range request past
# max_object_size (one slice; not counted). Then, for each kind:
#   cold — one request, nothing of it stored: origin bytes per client byte (nginx's
#          $body_bytes_sent summed from its access log; client bytes curl's size_download),
#          origin requests, and the slices the seek read (slice_seek_slices);
#   warm — READS more of the same request, every slice stored: Shellac's CPU (user + system,
#          /proc/PID/stat) per request, origin bytes (none expected).
# The MP4 seek is ?start=1.5 (cut at the keyframe at 1.0 s: the rewritten moov, then the data
# from there to the end); the FLV seek and the plain Range ask for as many bytes from the end.
# Also a HEAD ?start=1.5 on a cold URL (/head.mp4): the origin requests it costs (the moov's
# slice only, no media data).
#
#   cargo build --release --bins && cargo build --release --example seek_movie
#   bench/seek.sh                                      # READS=20 SCALE=20000 SLICE=1MiB
#   SHELLAC=target/debug/shellac MOVIE=target/debug/examples/seek_movie READS=3 bench/seek.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SHELLAC=${SHELLAC:-target/release/shellac}
MOVIE=${MOVIE:-target/release/examples/seek_movie}
READS=${READS:-20}
SCALE=${SCALE:-20000}
SLICE=${SLICE:-1MiB}
SIZE=$((2 * 1024 * 1024 * 1024))
. bench/lib.sh
need_built "$SHELLAC" "$MOVIE"
command -v nginx >/dev/null || { echo "needs nginx (apt-get install nginx)" >&2; exit 1; }
(( READS >= 1 && READS <= 1000 && SCALE >= 1 && SCALE <= 200000 )) \
  || { echo "READS 1-1000, SCALE 1-200000" >&2; exit 1; }

mkdir -p "$TMP/www" "$TMP/nginx"
chmod 755 "$TMP" "$TMP/www"
"$MOVIE" "$TMP/www/seek.mp4" "$SIZE" "$SCALE" >/dev/null
# A strong Last-Modified as well as the ETag; the same file under every name.
touch -d '2022-01-01 00:00:00' "$TMP/www/seek.mp4"
for name in plain.mp4 head.mp4 clip.flv; do ln "$TMP/www/seek.mp4" "$TMP/www/$name"; done

P_NGINX=$(free_port); P_SHELLAC=$(free_port); P_ADMIN=$(free_port)
start_nginx_files "$TMP/nginx" "$P_NGINX" "$TMP/www"
cat >"$TMP/shellac.toml" <<EOC
[server]
listen = ["127.0.0.1:$P_SHELLAC"]
admin = "127.0.0.1:$P_ADMIN"

[cache]
memory_size = "512MiB"
max_object_size = "64MiB"
slice_size = "$SLICE"

[[backend]]
host = "127.0.0.1"
port = $P_NGINX

[[rule]]
path = '\.mp4\$'
mp4 = true

[[rule]]
path = '\.flv\$'
flv = true
EOC
"$SHELLAC" serve --config "$TMP/shellac.toml" 2>"$TMP/shellac.err" &
SHELLAC_PID=$!
PIDS+=("$SHELLAC_PID")
for _ in $(seq 100); do
  curl -s -o /dev/null "http://127.0.0.1:$P_ADMIN/stats" && curl -s -o /dev/null "http://127.0.0.1:$P_NGINX/" && break
  sleep 0.1
done
URL="http://127.0.0.1:$P_SHELLAC"

origin_bytes() { awk '{s += $1} END {print s + 0}' "$TMP/nginx/bytes.log"; }
origin_requests() { wc -l <"$TMP/nginx/bytes.log"; }
counter() { curl -s "http://127.0.0.1:$P_ADMIN/stats" | python3 -c "import json,sys; print(json.load(sys.stdin).get('$1', 0))"; }
# GET $1 with the curl arguments after it; prints the bytes received.
fetch() { local u=$1; shift; curl -sf -o /dev/null -w '%{size_download}' "$@" "$URL$u"; }

# Learn each URL: one slice past max_object_size.
for name in seek.mp4 plain.mp4 head.mp4 clip.flv; do
  fetch "/$name" -H 'Range: bytes=1073741824-1073741824' >/dev/null
done
sleep 0.3
[[ $(counter slice_learnt) == 4 ]] || { echo "the URLs were not learnt as sliced" >&2; exit 1; }

# HEAD of a seek on a cold URL: the moov's slice only.
r0=$(origin_requests); b0=$(origin_bytes)
head_len=$(curl -sf -I "$URL/head.mp4?start=1.5" | awk 'tolower($1) == "content-length:" {print $2 + 0}')
sleep 0.3
printf 'HEAD /head.mp4?start=1.5, cold: Content-Length %s; origin requests %d, origin bytes %d\n' \
  "$head_len" $(( $(origin_requests) - r0 )) $(( $(origin_bytes) - b0 ))

# The kinds: name, path, curl arguments. The FLV seek and the plain Range ask for as many bytes
# as the MP4 seek's answer, from the file's end.
run_kind() {
  local kind=$1 path=$2; shift 2
  local r0 b0 s0 got b1 r1 t0 t1 n total=0
  GOT=0
  r0=$(origin_requests); b0=$(origin_bytes); s0=$(counter slice_seek_slices)
  got=$(fetch "$path" "$@")
  sleep 0.3
  b1=$(origin_bytes); r1=$(origin_requests)
  python3 -c "print('%-10s cold: client bytes %d, origin bytes %d (%.3f per client byte), origin requests %d, slices read for the seek %d' % ('$kind', $got, $b1 - $b0, ($b1 - $b0) / max($got, 1), $r1 - $r0, $(counter slice_seek_slices) - $s0))"
  t0=$(cpu_ticks "$SHELLAC_PID"); b0=$(origin_bytes)
  for n in $(seq "$READS"); do total=$(( total + $(fetch "$path" "$@") )); done
  t1=$(cpu_ticks "$SHELLAC_PID")
  python3 -c "print('%-10s warm: %d requests, %.1f ms CPU per request (%d ticks of 10 ms), %.2f ms CPU per MiB sent, origin bytes %d' % ('$kind', $READS, ($t1 - $t0) * 10 / $READS, $t1 - $t0, ($t1 - $t0) * 10 / max($total / 1048576, 1e-9), $(origin_bytes) - $b0))"
  GOT=$got
}
run_kind 'mp4 seek' '/seek.mp4?start=1.5'
mp4_len=$GOT
run_kind 'flv seek' "/clip.flv?start=$(( SIZE - mp4_len + 13 ))"
run_kind 'plain' '/plain.mp4' -H "Range: bytes=-$mp4_len"
printf 'file 2 GiB (samples x%d), slice %s, MP4 seek answer %d bytes; mp4_seek_whole %s, slice_seek %s\n' \
  "$SCALE" "$SLICE" "$mp4_len" "$(counter mp4_seek_whole)" "$(counter slice_seek)"
