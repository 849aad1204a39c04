#!/usr/bin/env bash
# Short bounded fuzz run of every target (default 30 s each), seeded from fuzz/corpus/.
#   fuzz/run.sh                 # all targets, 30 s each
#   FUZZ_SECONDS=600 fuzz/run.sh request_head request_stream
# Needs cargo-fuzz (`cargo install cargo-fuzz`). With a nightly toolchain it runs with
# AddressSanitizer; with stable only, without a sanitizer (RUSTC_BOOTSTRAP=1, -s none): still
# coverage-guided, panics and assertion failures are found, memory errors in unsafe code are not.
set -euo pipefail
cd "$(dirname "$0")"
SECONDS_EACH=${FUZZ_SECONDS:-30}
TARGETS=("$@")
if (( ${#TARGETS[@]} == 0 )); then
  TARGETS=(request_head request_stream cache_key range vary config)
fi
command -v cargo-fuzz >/dev/null 2>&1 || { echo "cargo-fuzz not installed: cargo install cargo-fuzz" >&2; exit 2; }
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  FUZZ=(cargo +nightly fuzz)
  SAN=()
else
  export RUSTC_BOOTSTRAP=1
  FUZZ=(cargo fuzz)
  SAN=(-s none)
fi
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1}
for t in "${TARGETS[@]}"; do
  echo "== fuzz $t (${SECONDS_EACH}s)"
  mkdir -p "corpus/$t"
  # New inputs go to a scratch directory; the committed seeds stay as they are.
  work=$(mktemp -d)
  "${FUZZ[@]}" run "${SAN[@]}" "$t" "$work" "corpus/$t" -- \
    -max_total_time="$SECONDS_EACH" -max_len=4096 -timeout=10 -print_final_stats=1
  rm -rf "$work"
done
echo "fuzz: ${#TARGETS[@]} targets, ${SECONDS_EACH}s each, no failure"
