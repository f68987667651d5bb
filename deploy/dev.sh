#!/usr/bin/env bash
# txhub for developers: one script for the README's quick start.
#
#   deploy/dev.sh demo        install what is missing, build, start a throwaway
#                             PostgreSQL and the embedded broker, run the hub
#                             with a small demo
#   deploy/dev.sh test        the same set-up, then the whole test suite
#   deploy/dev.sh bench [N]   push N prepare+commit pairs through (default 50000);
#                             embedded broker, fsync off: development figures
#   deploy/dev.sh bench-real [N]
#                             txhub bench at production settings: Apache Kafka
#                             (deploy/kafka.sh), durable PostgreSQL; a drain of
#                             N (default 100000) and open-loop runs
#   deploy/dev.sh bench-checkback [N]
#                             N check-backs due at once against a local
#                             endpoint (default 20000), and idle CPU
#
# Works on Debian 12 as root or as a user with sudo. Nothing is installed
# outside Debian's packages; the build goes to ./build ($TXHUB_BUILD).
set -euo pipefail
cd "$(dirname "$0")/.."

. deploy/packages.sh
# prometheus for promtool and python3-yaml for tests/deploy/check_names.py:
# the tests of the alert rules and the dashboard in deploy/
packages=(gcc pkg-config python3 meson ninja-build librdkafka-dev libpq-dev libcjson-dev
          libcurl4-openssl-dev libssl-dev libcriterion-dev libmicrohttpd-dev postgresql kcat
          prometheus python3-yaml
          # the Python package (clients/python), its tests and the install test
          python3-confluent-kafka python3-psycopg python3-pytest python3-jsonschema
          python3-venv python3-setuptools
          # the Java clients (clients/java): Java 17 and Maven; Maven Central for the rest
          openjdk-17-jdk-headless maven
          # the web console's browser tests (tests/browser): Debian's Chromium, driven by
          # playwright-core from npm (tests/browser/package-lock.json)
          chromium)
# Node.js and npm: the machine's own when it has them (a Node.js 20 with npm
# from another source must not be replaced by Debian's 18); Debian's otherwise
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)


b=${TXHUB_BUILD:-build}   # build directory

# Quiet when it builds; meson's or the compiler's words when it does not.
build() {
  local out
  if [ ! -f "$b/build.ninja" ]; then
    out=$(meson setup "$b" ${TXHUB_MESON_OPTIONS:-} 2>&1) || {
      printf '%s\n' "$out"; echo "dev.sh: meson setup $b failed" >&2; exit 1; }
  fi
  out=$(ninja -C "$b" 2>&1) || {
    printf '%s\n' "$out" | grep -v '^\['; echo "dev.sh: building $b failed" >&2; exit 1; }
}

# Print every Criterion synthesis line from the last meson test run, the
# restart and chaos figures, pytest's, the install test's, the Java test's, the
# browser test's and the Go tests' closing lines,
# then one plain "N passed, N failed" line counting them all.
summarise() {
  local log base
  # the run's own log: --logbase's when given (runs side by side in one
  # build directory), else the newest (testlog-<setup>.txt too)
  base=$(sed -nE 's/(^|.* )--logbase[= ]([^ ]+).*/\2/p' <<<"${TXHUB_TEST_ARGS:-}")
  if [ -n "$base" ]; then
    log=$b/meson-logs/$base.txt
    [ -f "$log" ] || log=
  else
    log=$(ls -t "$b"/meson-logs/testlog*.txt 2>/dev/null | head -1)
  fi
  [ -n "$log" ] || return 0
  grep -h "Synthesis: Tested" "$log" || true
  grep -hE "^(restart|chaos|failover): " "$log" || true
  grep -hE "^[0-9]+ (passed|failed)" "$log" | sed 's/^/pytest: /' || true
  grep -hE "^(install_test|browser|java|go_test): [0-9]" "$log" || true
  { grep -h "Synthesis: Tested" "$log" | sed 's/\x1b\[[0-9;]*m//g' || true
    grep -hE "^((install_test|browser|java|go_test): )?[0-9]+ (passed|failed)|^[0-9]+ failed, " "$log" |
      sed -E 's/^(install_test|browser|java|go_test): //' || true
  } | awk -F'|' '
    /Synthesis/ { for (i = 1; i <= NF; i++) {
        if ($i ~ /Passing:/) { split($i, a, ":"); p += a[2] }
        if ($i ~ /Failing:/) { split($i, a, ":"); f += a[2] }
        if ($i ~ /Crashing:/) { split($i, a, ":"); f += a[2] } } }
    !/Synthesis/ { n = split($0, w, /[ ,]+/)
        for (i = 2; i <= n; i++) {
          if (w[i] == "passed") p += w[i - 1]
          if (w[i] == "failed" || w[i] == "error" || w[i] == "errors") f += w[i - 1] } }
    END { printf "tests: %d passed, %d failed\n", p, f }'
}

cmd=${1:-}
case "$cmd" in
  demo)
    install_missing "${packages[@]}"
    build
    exec tests/with-services.sh "$b/txhub" deploy/demo.sh
    ;;
  test)
    install_missing "${packages[@]}"
    build
    set +e
    # the suites side by side: they mostly wait on PostgreSQL and the
    # broker (tests/meson.build)
    tests/with-services.sh "$b/txhub" meson test -C "$b" --print-errorlogs --no-rebuild \
      --num-processes "${TXHUB_TEST_PROCESSES:-$(( $(nproc) * 3 ))}" ${TXHUB_TEST_ARGS:-}
    rc=$?
    set -e
    summarise
    exit $rc
    ;;
  bench)
    install_missing "${packages[@]}"
    b=${TXHUB_BUILD:-build-release}
    TXHUB_MESON_OPTIONS="--buildtype=release" build
    exec tests/with-services.sh "$b/txhub" deploy/bench.sh "${2:-50000}"
    ;;
  bench-real)
    install_missing "${packages[@]}"
    b=${TXHUB_BUILD:-build-release}
    TXHUB_MESON_OPTIONS="--buildtype=release" build
    exec deploy/bench-real.sh "$b/txhub" "${2:-100000}"
    ;;
  bench-checkback)
    install_missing "${packages[@]}"
    b=${TXHUB_BUILD:-build-release}
    TXHUB_MESON_OPTIONS="--buildtype=release" build
    exec tests/with-services.sh "$b/txhub" deploy/bench-checkback.sh "${2:-20000}"
    ;;
  *)
    echo "usage: deploy/dev.sh demo | test | bench [N] | bench-real [N] | bench-checkback [N]" >&2
    exit 2
    ;;
esac
