#!/usr/bin/env bash
# The Go module's checks (suite 'go'): go vet, staticcheck, and go test
# -race, whose end-to-end test runs the Go examples against the hub when
# TXHUB_BIN, TXHUB_PG and TXHUB_BROKERS are set (tests/with-services.sh).
#
#   tests/clients/go_test.sh SOURCE_ROOT
#
# Exits 77 (skipped) without a Go toolchain. Modules come from the Go
# module proxy into the module cache (GOMODCACHE, ~/go/pkg/mod by default).
set -euo pipefail

src=$(realpath "$1")
go=$(command -v go || true)
[ -z "$go" ] && [ -x /usr/local/go/bin/go ] && go=/usr/local/go/bin/go
if [ -z "$go" ]; then
  echo "go_test: no Go toolchain (go on PATH or /usr/local/go/bin/go): skipping the Go client's tests"
  exit 77
fi
# the end-to-end test builds the examples with the same go
export PATH="$(dirname "$go"):$PATH"
cd "$src/clients/go"
echo "go_test: $("$go" version)"
"$go" vet ./...
# pinned, as go.mod pins the module's own dependencies
"$go" run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
# -v for a count of the tests (and subtests) run, as the other suites give one
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
"$go" test -race -count=1 -timeout 10m -v ./... 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
skipped=$(grep -cE '^ *--- SKIP' "$log" || true)
echo "go_test: $(grep -cE '^ *--- PASS' "$log") passed, $(grep -cE '^ *--- FAIL' "$log") failed, $skipped skipped"
# with the services there, a test that skipped did not test what it should
if [ "$rc" = 0 ] && [ "$skipped" != 0 ] && [ -n "${TXHUB_PG:-}" ] && [ -n "${TXHUB_BROKERS:-}" ] &&
   [ -n "${TXHUB_BIN:-}" ]; then
  echo "go_test: $skipped test(s) skipped although TXHUB_PG, TXHUB_BROKERS and TXHUB_BIN are set" >&2
  exit 1
fi
exit "$rc"
