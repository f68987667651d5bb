#!/usr/bin/env bash
# tests/browser/run.sh BUILD_DIR: the web console end to end in Debian's
# headless Chromium (/usr/bin/chromium), driven by playwright-core from
# npm (pinned in package-lock.json; installed with `npm ci` into
# BUILD_DIR/browser, never a browser download). Needs the services of
# tests/with-services.sh (TXHUB_PG, TXHUB_BROKERS, TXHUB_BIN); meson test
# runs it as the test 'browser' (suite 'browser'). Screenshots of every page
# go to BUILD_DIR/console-screenshots.
#
# Without chromium or npm it is skipped (exit 77), except under CI (CI set),
# where that is a failure: CI must not pass by testing nothing.
set -euo pipefail
src=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd)
work="$build/browser"

if [ ! -x /usr/bin/chromium ] || ! command -v npm >/dev/null || ! command -v node >/dev/null; then
  echo "browser tests need /usr/bin/chromium (Debian's chromium), node and npm" >&2
  [ -n "${CI:-}" ] && exit 1
  exit 77
fi
for v in TXHUB_PG TXHUB_BROKERS TXHUB_BIN; do
  [ -n "${!v:-}" ] || { echo "$v is not set: run through tests/with-services.sh" >&2; exit 1; }
done

mkdir -p "$work"
# npm ci only when the lock changed: it empties node_modules first
if ! cmp -s "$src/package-lock.json" "$work/package-lock.json" ||
   [ ! -f "$work/node_modules/playwright-core/package.json" ]; then
  cp "$src/package.json" "$src/package-lock.json" "$work/"
  (cd "$work" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi

export TXHUB_BROWSER_DIR="$work"
export TXHUB_SCREENSHOTS="$build/console-screenshots"
mkdir -p "$TXHUB_SCREENSHOTS"
set +e
node --test --test-reporter=spec --test-concurrency=1 "$src/console.test.mjs" 2>&1 | tee "$work/last-run.txt"
rc=${PIPESTATUS[0]}
set -e
# one plain line for deploy/dev.sh's summary, like pytest's
pass=$(sed -n 's/^ℹ pass \([0-9]*\)$/\1/p' "$work/last-run.txt" | tail -1)
fail=$(sed -n 's/^ℹ fail \([0-9]*\)$/\1/p' "$work/last-run.txt" | tail -1)
echo "browser: ${pass:-0} passed, ${fail:-0} failed"
echo "browser: screenshots in $TXHUB_SCREENSHOTS"
exit "$rc"
