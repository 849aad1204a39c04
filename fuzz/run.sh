#!/usr/bin/env bash
# Short bounded fuzz run of every target (default 30 s each), seeded from fuzz/corpus/.
#   fuzz/run.sh                                   # all targets, 30 s each
#   FUZZ_SECONDS=600 fuzz/run.sh request_head request_stream
#   FUZZ_TOOLCHAIN=stable fuzz/run.sh             # force the stable path (what a bare CI has)
#   FUZZ_RUNS=500000 FUZZ_SEED=1 fuzz/run.sh      # a fixed number of inputs from a fixed seed:
#                                                 # the same inputs on every machine (what CI runs)
#   FUZZ_BUILD_ONLY=1 fuzz/run.sh                 # build the targets, run none
#   FUZZ_JOBS=2 fuzz/run.sh                       # two targets at a time (what CI runs)
# Needs cargo-fuzz (`cargo install cargo-fuzz --locked`). FUZZ_TOOLCHAIN=auto (default) uses
# nightly when it is installed, with AddressSanitizer; with stable only (or
# FUZZ_TOOLCHAIN=stable) it runs without a sanitizer (RUSTC_BOOTSTRAP=1, -s none): still
# coverage-guided, panics and assertion failures are found, memory errors in unsafe code are not.
# Every target is run even after one fails; the script exits 1 if any failed and lists the
# crashing inputs (fuzz/artifacts/<target>/crash-*, or oom-*/timeout-*/slow-unit-*).
set -euo pipefail
cd "$(dirname "$0")"
SECONDS_EACH=${FUZZ_SECONDS:-30}
# With FUZZ_RUNS, each target runs exactly that many inputs from seed FUZZ_SEED instead of for
# a time: libFuzzer is deterministic for a given binary, corpus and seed, so a CI failure is a
# regression that reproduces here, never the luck of a faster machine. Exploring new ground is
# what the time-bounded runs are for.
RUNS=${FUZZ_RUNS:-}
SEED=${FUZZ_SEED:-1}
if [[ -n $RUNS ]]; then
  [[ $RUNS =~ ^[0-9]+$ && $SEED =~ ^[0-9]+$ ]] || { echo "FUZZ_RUNS and FUZZ_SEED must be numbers" >&2; exit 2; }
  BOUND=(-runs="$RUNS" -seed="$SEED")
  BOUND_TEXT="$RUNS inputs, seed $SEED"
else
  BOUND=(-max_total_time="$SECONDS_EACH")
  BOUND_TEXT="${SECONDS_EACH}s"
fi
TOOLCHAIN=${FUZZ_TOOLCHAIN:-auto}
TARGETS=("$@")
if (( ${#TARGETS[@]} == 0 )); then
  TARGETS=(request_head request_stream cache_key range vary config esi proxy_protocol fastcgi mp4)
fi
command -v cargo-fuzz >/dev/null 2>&1 || { echo "cargo-fuzz not installed: cargo install cargo-fuzz --locked" >&2; exit 2; }
if [[ $TOOLCHAIN == auto ]]; then
  if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then TOOLCHAIN=nightly; else TOOLCHAIN=stable; fi
fi
case $TOOLCHAIN in
  nightly)
    FUZZ=(cargo +nightly fuzz)
    SAN=()
    REPRO=
    ;;
  stable)
    # cargo-fuzz passes unstable flags (-Z...); the stable compiler accepts them this way.
    # The default toolchain, not `+stable`: a CI machine may have its stable compiler under
    # a versioned name only, and rustup would try to download `stable` (no network there).
    export RUSTC_BOOTSTRAP=1
    FUZZ=(cargo fuzz)
    SAN=(-s none)
    REPRO="RUSTC_BOOTSTRAP=1 "
    ;;
  *) echo "FUZZ_TOOLCHAIN must be auto, nightly or stable, not '$TOOLCHAIN'" >&2; exit 2 ;;
esac
# Build parallelism is cargo's default (all cores) unless CARGO_BUILD_JOBS says otherwise.
echo "== fuzz: toolchain $TOOLCHAIN ($(${FUZZ[0]} ${FUZZ[1]} --version 2>/dev/null || true)), sanitizer ${SAN[*]:-address}"
# Build every target in one cargo invocation (the shellac crate and its dependencies once),
# so the time of the build and of the runs are separate in the log.
start=$SECONDS
"${FUZZ[@]}" build "${SAN[@]}"
echo "== fuzz: built in $((SECONDS - start))s"
# FUZZ_BUILD_ONLY=1: build, run nothing (.ci/run builds beside the tests, runs after them).
[[ ${FUZZ_BUILD_ONLY:-} == 1 ]] && exit 0
# FUZZ_JOBS targets at a time (default 1: one after another, output as it comes). Each target
# is its own libFuzzer process with its own seed and corpus, so its inputs are the same at any
# FUZZ_JOBS; with more than one, each target's output is printed whole, in order, at the end.
JOBS=${FUZZ_JOBS:-1}
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || { echo "FUZZ_JOBS must be a number of at least 1" >&2; exit 2; }
run_target() {
  local t=$1 t0=$SECONDS work status=0
  echo "== fuzz $t ($BOUND_TEXT)"
  mkdir -p "corpus/$t" "artifacts/$t"
  # New inputs go to a scratch directory; the committed seeds stay as they are.
  work=$(mktemp -d)
  "${FUZZ[@]}" run "${SAN[@]}" "$t" "$work" "corpus/$t" -- \
    "${BOUND[@]}" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 || status=1
  echo "== fuzz $t: $((SECONDS - t0))s"
  rm -rf "$work"
  return $status
}
failed=()
if (( JOBS == 1 )); then
  for t in "${TARGETS[@]}"; do
    run_target "$t" || failed+=("$t")
  done
else
  logs=$(mktemp -d)
  for t in "${TARGETS[@]}"; do
    while (( $(jobs -rp | wc -l) >= JOBS )); do wait -n || true; done
    { if run_target "$t" >"$logs/$t.log" 2>&1; then echo 0; else echo 1; fi >"$logs/$t.status"; } &
  done
  wait
  for t in "${TARGETS[@]}"; do
    cat "$logs/$t.log"
    [[ $(cat "$logs/$t.status" 2>/dev/null) == 0 ]] || failed+=("$t")
  done
  rm -rf "$logs"
fi
if (( ${#failed[@]} > 0 )); then
  echo "fuzz: FAILED: ${failed[*]}" >&2
  for t in "${failed[@]}"; do
    for f in "artifacts/$t"/*; do
      [[ -e $f ]] && echo "  input: fuzz/$f  (reproduce: cd fuzz && ${REPRO}${FUZZ[*]} run ${SAN[*]} $t $f)" >&2
    done
  done
  exit 1
fi
echo "fuzz: ${#TARGETS[@]} targets, $BOUND_TEXT each, no failure"
