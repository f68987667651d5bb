#!/usr/bin/env bash
# Run a test program with a PostgreSQL of its own, on the broker of the run
# it is part of: for the suites that stop PostgreSQL (TXHUB_TEST_PGCTL), so
# that they may run beside the others (tests/meson.build).
#
#   tests/own-postgres.sh TEST_PROGRAM [ARG]...
set -euo pipefail
: "${TXHUB_BIN:?TXHUB_BIN names the txhub binary}"
: "${TXHUB_BROKERS:?run inside tests/with-services.sh}"
export TXHUB_TEST_BROKERS=${TXHUB_TEST_BROKERS:-$TXHUB_BROKERS}
exec "$(dirname "$0")/with-services.sh" "$TXHUB_BIN" "$@"
