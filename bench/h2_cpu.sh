#!/usr/bin/env bash
# HTTP/2 hits, CPU per request of two Shellac builds (issue 20): both started (h2c, one worker
# thread, CPU 0) in front of bench/origin.rs, h2load (CPU 1, C connections × M streams, N
# requests) alternating between them for ROUNDS rounds on /hit6k and /small100; prints the
# user+system ticks (10 ms) each build's process used per round. CPU per request moves much
# less than req/s on a busy machine. TLS=1: over TLS instead (a [[tls]] listener, ALPN h2,
# one ECDSA P-256 certificate; h2load on https://).
#
#   A=path/to/shellac-before B=target/release/shellac bench/h2_cpu.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
A=${A:?A=path to the first shellac}
B=${B:-target/release/shellac}
N=${N:-100000}
C=${C:-10}
M=${M:-10}
ROUNDS=${ROUNDS:-4}
TLS=${TLS:-0}
ORIGIN=${ORIGIN:-target/release/examples/origin}
. bench/lib.sh
need_built "$A" "$B" "$ORIGIN"
command -v h2load >/dev/null || { echo "h2load missing (apt-get install nghttp2-client)" >&2; exit 1; }
start_origin "$ORIGIN"
SCHEME=http
CURL=(curl -s --http2-prior-knowledge)
if (( TLS )); then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
    -subj /CN=bench.test -addext subjectAltName=DNS:bench.test \
    -keyout "$TMP/key.pem" -out "$TMP/cert.pem" 2>/dev/null
  SCHEME=https
  CURL=(curl -sk --http2)
fi
declare -A PORT PID
for s in A B; do
  extra=""
  if (( TLS )); then
    tls_port=$(free_port)
    extra="
[[tls]]
listen = \"127.0.0.1:$tls_port\"
[[tls.certificate]]
cert = \"$TMP/cert.pem\"
key = \"$TMP/key.pem\""
  fi
  read -r p _ pid < <(start_shellac "${!s}" "idle_timeout = \"600s\"

[http2]
h2c = true
max_requests = 0
$extra")
  if (( TLS )); then p=$tls_port; fi
  PIDS+=("$pid"); PORT[$s]=$p; PID[$s]=$pid
done
for s in A B; do
  for _ in $(seq 100); do
    "${CURL[@]}" -o /dev/null "$SCHEME://127.0.0.1:${PORT[$s]}/hit6k" && break
    sleep 0.1
  done
  for path in hit6k small100; do for _ in 1 2 3; do
    "${CURL[@]}" -o /dev/null "$SCHEME://127.0.0.1:${PORT[$s]}/$path"
  done; done
done
echo "h2load -c$C -m$M -n$N ($SCHEME), $ROUNDS rounds; CPU ticks (10 ms) of each Shellac per round"
for path in hit6k small100; do
  ta=(); tb=()
  for _ in $(seq "$ROUNDS"); do
    for s in A B; do
      t0=$(cpu_ticks "${PID[$s]}")
      taskset -c 1 h2load -c"$C" -m"$M" -n"$N" "$SCHEME://127.0.0.1:${PORT[$s]}/$path" >/dev/null 2>&1
      t=$(( $(cpu_ticks "${PID[$s]}") - t0 ))
      if [[ $s == A ]]; then ta+=("$t"); else tb+=("$t"); fi
    done
  done
  ma=$(median "${ta[@]}"); mb=$(median "${tb[@]}")
  printf '/%s  A %s ticks (%s)  B %s ticks (%s)  B/A %.2f\n' \
    "$path" "$ma" "${ta[*]}" "$mb" "${tb[*]}" "$(python3 -c "print($mb / $ma)")"
done
