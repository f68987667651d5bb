#!/usr/bin/env bash
# Run a command with a throwaway PostgreSQL and an embedded Kafka broker.
#
#   tests/with-services.sh TXHUB_BINARY COMMAND [ARG]...
#
# Starts PostgreSQL (initdb into a temporary directory, Unix socket only,
# fsync off) and `txhub devbroker`, exports TXHUB_PG, TXHUB_BROKERS and the
# PG* variables for COMMAND, and removes everything when COMMAND ends. Works
# as a normal user and as root (PostgreSQL then runs as the postgres user).
# When TXHUB_TEST_BROKERS is set, that broker is used instead of devbroker.
# TXHUB_TEST_PG_DURABLE=1 keeps fsync, full_page_writes and synchronous_commit
# as shipped (for figures), TXHUB_TEST_PG_OPTIONS adds server options ("-c
# name=value ..."); the server's log is TXHUB_TEST_PGLOG.
set -euo pipefail

txhub=$(realpath "$1")
shift

pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -z "$pgbin" ] || [ ! -x "$pgbin/initdb" ]; then
  echo "with-services: no PostgreSQL server found (apt-get install postgresql)" >&2
  exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/txhub-test.XXXXXX")
chmod 755 "$tmp"
broker_pid=""
as_pg=()
if [ "$(id -u)" = 0 ]; then
  # initdb refuses to run as root
  as_pg=(runuser -u postgres --)
  chown postgres "$tmp"
fi

cleanup() {
  set +e
  [ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null && wait "$broker_pid" 2>/dev/null
  [ -f "$tmp/pg/postmaster.pid" ] && "${as_pg[@]}" "$pgbin/pg_ctl" -D "$tmp/pg" -m immediate stop >/dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

pgopts="-F -c full_page_writes=off -c synchronous_commit=off"
[ -n "${TXHUB_TEST_PG_DURABLE:-}" ] && pgopts=""
pgopts="-c listen_addresses= -k $tmp $pgopts -c max_connections=500 ${TXHUB_TEST_PG_OPTIONS:-}"
"${as_pg[@]}" "$pgbin/initdb" -D "$tmp/pg" -U txhub -A trust -E UTF8 --no-locale >"$tmp/initdb.log" 2>&1 ||
  { cat "$tmp/initdb.log" >&2; exit 1; }
"${as_pg[@]}" "$pgbin/pg_ctl" -D "$tmp/pg" -l "$tmp/pg.log" -w -t 60 \
  -o "$pgopts" start >/dev/null || { cat "$tmp/pg.log" >&2; exit 1; }

export PGHOST="$tmp" PGUSER=txhub PGDATABASE=postgres PGPORT=5432
export TXHUB_PG="host=$tmp user=txhub dbname=postgres"
export TXHUB_TEST_PGDATA="$tmp/pg" TXHUB_TEST_PGBIN="$pgbin" TXHUB_TEST_PGLOG="$tmp/pg.log"
# for the outage tests: "$TXHUB_TEST_PGCTL stop" / "$TXHUB_TEST_PGCTL start"
cat >"$tmp/pgctl" <<SH
#!/bin/sh
exec ${as_pg[*]} "$pgbin/pg_ctl" -D "$tmp/pg" -l "$tmp/pg.log" -w -t 60 -m fast \
  -o "$pgopts" "\$@"
SH
chmod 755 "$tmp/pgctl"
export TXHUB_TEST_PGCTL="$tmp/pgctl"

if [ -n "${TXHUB_TEST_BROKERS:-}" ]; then
  export TXHUB_BROKERS="$TXHUB_TEST_BROKERS"
else
  "$txhub" devbroker --brokers 1 >"$tmp/broker.out" 2>"$tmp/broker.log" &
  broker_pid=$!
  for _ in $(seq 1 100); do
    [ -s "$tmp/broker.out" ] && break
    sleep 0.05
  done
  TXHUB_BROKERS=$(head -n 1 "$tmp/broker.out")
  if [ -z "$TXHUB_BROKERS" ]; then
    cat "$tmp/broker.log" >&2
    echo "with-services: devbroker did not start" >&2
    exit 1
  fi
  export TXHUB_BROKERS
fi
export TXHUB_BIN="$txhub"

set +e
"$@"
rc=$?
set -e
exit $rc
