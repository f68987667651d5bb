#!/usr/bin/env bash
# Fuzz the parsers of outside input with libFuzzer, under AddressSanitizer
# and UndefinedBehaviorSanitizer, for a bounded time; any crash, sanitizer
# report or broken invariant fails (exit status non-zero) and leaves the
# input in $TXHUB_BUILD_FUZZ (build-fuzz)/crashes/.
#
#   deploy/fuzz.sh [SECONDS]   envelope parser for SECONDS (default 60), the
#                              check-back answer parser and the client
#                              library's inputs for a third of that each
#
# Installs clang and its runtime from Debian's packages when missing. The
# seed corpora in tests/fuzz/corpus/ are copied, never modified.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
b=${TXHUB_BUILD_FUZZ:-build-fuzz}

. deploy/packages.sh
install_missing clang libclang-rt-14-dev meson ninja-build pkg-config libcjson-dev librdkafka-dev \
  libpq-dev libcurl4-openssl-dev libssl-dev libcriterion-dev

if [ ! -f "$b/build.ninja" ]; then
  CC=clang meson setup "$b" -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false \
    --buildtype=debugoptimized >"$b.setup.log" 2>&1 || {
    cat "$b.setup.log"; echo "fuzz.sh: meson setup of $b failed" >&2; exit 1; }
fi
# Quiet when it builds; the compiler's and linker's words when it does not.
out=$(ninja -C "$b" tests/fuzz/fuzz-envelope tests/fuzz/fuzz-answer tests/fuzz/fuzz-client 2>&1) || {
  printf '%s\n' "$out" | grep -v '^\[' ; echo "fuzz.sh: building the fuzz targets failed" >&2; exit 1; }

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
mkdir -p "$b/crashes"
run() { # name seconds
  local corpus; corpus=$(mktemp -d)
  cp tests/fuzz/corpus/"$1"/* "$corpus"/
  echo "== fuzz-$1 for $2 s"
  "$b/tests/fuzz/fuzz-$1" -max_total_time="$2" -print_final_stats=1 -max_len=8192 -timeout=10 \
    -artifact_prefix="$b/crashes/$1-" "$corpus" 2>"$b/fuzz-$1.log" || {
    tail -50 "$b/fuzz-$1.log"; echo "fuzz.sh: fuzz-$1 FAILED; input in $b/crashes/" >&2
    rm -rf "$corpus"; exit 1; }
  grep -E "stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb" \
    "$b/fuzz-$1.log" | sed "s/^/fuzz-$1: /"
  echo "fuzz-$1: corpus grew from $(ls tests/fuzz/corpus/"$1" | wc -l) to $(ls "$corpus" | wc -l) inputs"
  rm -rf "$corpus"
}
run envelope "$secs"
run answer "$((secs / 3 > 0 ? secs / 3 : 1))"
run client "$((secs / 3 > 0 ? secs / 3 : 1))"
