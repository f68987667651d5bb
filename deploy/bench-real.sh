#!/usr/bin/env bash
# The benchmark at production settings, run by `deploy/dev.sh bench-real`:
# Apache Kafka from deploy/kafka.sh (TXHUB_KAFKA_VERSION, default 4.4.0)
# and a durable PostgreSQL (fsync, synchronous_commit and full_page_writes
# on), both throwaway, on this
# machine; then `txhub bench` with the hub's default settings:
#
#   1. drain: N transactions (default 100000) produced on
#      TXHUB_BENCH_PARTITIONS control partitions (default 8) first, then
#      one hub started to drain them;
#   2. open loop at each RATE:SECONDS of TXHUB_BENCH_RATES (default
#      "2000:60 10000:30"; "none": no open loop), the hub running:
#      commit-to-forward latency;
#
# (TXHUB_BENCH_DRAIN=none leaves out the drains: open loops only)
#
# both for each forward.mode of TXHUB_BENCH_MODES (default "at_least_once
# exactly_once"), each TXHUB_BENCH_REPEAT times (default 1), with the
# arguments of TXHUB_BENCH_VARIANTS in turn when set: "|"-separated
# argument lists for txhub bench, e.g.
# TXHUB_BENCH_VARIANTS="--tenants 100|--tenants 100 --no-enforce". Runs
# alternate: each repetition runs every variant in every mode in turn (the
# machine's load drifts; runs of one kind in a row would measure it).
#
# TXHUB_BENCH_HUB=OTHER_TXHUB: the database is migrated and the hub run by that
# binary (another version, e.g. 0.4.0 built side by side), driven and
# measured by TXHUB_BINARY's bench, so that both get the same figures. A
# variant may say so for its runs only ("--hub-binary OTHER_TXHUB"), e.g.
# TXHUB_BENCH_VARIANTS="--hub-binary /tmp/txhub-040/build-rel/txhub|" to
# alternate 0.4.0 and this version run by run.
#
# Each run prints one JSON line on stdout (see docs/benchmark.md); the hub's
# log of each run is kept in $TXHUB_BENCH_OUT (default /tmp/txhub-bench-real).
#
# A variant's own --partitions wins over TXHUB_BENCH_PARTITIONS, e.g.
# TXHUB_BENCH_VARIANTS="--partitions 8|--partitions 32".
#
#   deploy/bench-real.sh TXHUB_BINARY [N]
set -euo pipefail
cd "$(dirname "$0")/.."
txhub=$(realpath "$1")
hub=$txhub hub_arg=()
if [ -n "${TXHUB_BENCH_HUB:-}" ]; then
  hub=$(realpath "$TXHUB_BENCH_HUB") hub_arg=(--hub-binary "$hub")
fi
n=${2:-100000}
rates=${TXHUB_BENCH_RATES:-2000:60 10000:30}
[ "$rates" = none ] && rates=
repeat=${TXHUB_BENCH_REPEAT:-1}
partitions=${TXHUB_BENCH_PARTITIONS:-8}
# (a sentinel field keeps a trailing empty variant, e.g. "A|": read drops it)
IFS='|' read -r -a variants <<< "${TXHUB_BENCH_VARIANTS:-}|."
unset 'variants[${#variants[@]}-1]'
[ ${#variants[@]} -gt 0 ] || variants=("")
modes=${TXHUB_BENCH_MODES:-at_least_once exactly_once}
out=${TXHUB_BENCH_OUT:-/tmp/txhub-bench-real}
mkdir -p "$out"

pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
tmp=$(mktemp -d /tmp/txhub-bench-real.XXXXXX)
chmod 755 "$tmp"
as_pg=()
if [ "$(id -u)" = 0 ]; then as_pg=(runuser -u postgres --); chown postgres "$tmp"; fi
kdir=$tmp/kafka
cleanup() {
  set +e
  deploy/kafka.sh stop "$kdir" >/dev/null 2>&1
  "${as_pg[@]}" "$pgbin/pg_ctl" -D "$tmp/pg" -m fast stop >/dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT

# PostgreSQL as it runs in production: durable. Only the socket is local.
"${as_pg[@]}" "$pgbin/initdb" -D "$tmp/pg" -U txhub -A trust -E UTF8 --no-locale >/dev/null
"${as_pg[@]}" "$pgbin/pg_ctl" -D "$tmp/pg" -l "$tmp/pg.log" -w -t 60 \
  -o "-c listen_addresses= -k $tmp -c fsync=on -c synchronous_commit=on -c full_page_writes=on -c max_connections=100" \
  start >/dev/null
settings=$(psql -h "$tmp" -U txhub -d postgres -Atc \
  "SELECT string_agg(name || '=' || setting, ' ') FROM pg_settings
   WHERE name IN ('fsync', 'synchronous_commit', 'full_page_writes', 'shared_buffers', 'wal_level')")
echo "bench-real: PostgreSQL $("$pgbin/postgres" --version | awk '{print $3}'): $settings" >&2
brokers=$(deploy/kafka.sh start "$kdir")
echo "bench-real: Apache Kafka at $brokers" >&2

# one database, control topic and group per run. Each run starts after a
# checkpoint (full-page images alike for all) and its database is dropped
# after it, so that no autovacuum of an earlier run's rows writes into a
# later run's WAL figure. A variant's --hub-binary also migrates.
run() {
  local name=$1; shift
  local mig=$hub a prev=
  for a in "$@"; do [ "$prev" = --hub-binary ] && mig=$a; prev=$a; done
  psql -h "$tmp" -U txhub -d postgres -qc "CREATE DATABASE $name" >/dev/null
  local pg="host=$tmp user=txhub dbname=$name" rc=0
  "$mig" migrate -X pg="$pg" 2>/dev/null
  psql -h "$tmp" -U txhub -d postgres -qc CHECKPOINT
  "$txhub" bench -X pg="$pg" -X brokers="$brokers" -X control_topic="bench.$name" \
    -X group="bench-$name" --partitions "$partitions" --hub-log "$out/$name.log" "${hub_arg[@]}" "$@" || rc=$?
  psql -h "$tmp" -U txhub -d postgres -qc "DROP DATABASE $name WITH (FORCE)" >/dev/null
  return $rc
}
seq=0
for ((rep = 1; rep <= repeat; rep++)); do
  for v in "${variants[@]}"; do
    for mode in $modes; do
      tag=${mode%%_*} # at, exactly
      seq=$((seq + 1))
      # shellcheck disable=SC2086 # a variant is a list of arguments
      [ "${TXHUB_BENCH_DRAIN:-}" = none ] ||
        run "drain_${tag}_$seq" --start-hub --preload --count "$n" -X forward.mode="$mode" $v
      for r in $rates; do
        rate=${r%%:*} secs=${r##*:}
        # shellcheck disable=SC2086
        run "rate${rate}_${tag}_$seq" --start-hub --rate "$rate" --count $((rate * secs)) \
          --ceiling-tx 50000 -X forward.mode="$mode" $v
      done
    done
  done
done
