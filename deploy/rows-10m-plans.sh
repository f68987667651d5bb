#!/usr/bin/env bash
# The plans, with their times, of the operators' commands and of a hub's
# periodic queries on a database made by deploy/rows-10m.sh (docs/architecture.md: Storage).
# The PostgreSQL server must have auto_explain loaded
# (shared_preload_libraries = auto_explain); its log file is read back.
#
#   deploy/rows-10m-plans.sh TXHUB_BINARY CONNINFO SERVER_LOG [OUT_DIR]
#
# For each step, OUT_DIR (default /tmp/rows-10m-plans) gets STEP.log: the
# plans of every statement it ran (EXPLAIN ANALYZE, BUFFERS), and the
# command's wall time is printed.
set -euo pipefail
txhub=$1
pg=$2
log=$3
out=${4:-/tmp/rows-10m-plans}
mkdir -p "$out"
export PGOPTIONS="-c auto_explain.log_min_duration=0 -c auto_explain.log_analyze=on \
-c auto_explain.log_buffers=on -c auto_explain.log_nested_statements=on"
step() {
  local name=$1; shift
  local from; from=$(stat -c %s "$log")
  local t0; t0=$(date +%s.%N)
  "$@" >/dev/null 2>"$out/$name.err" || echo "$name: exit $?" >&2
  local t1; t1=$(date +%s.%N)
  sleep 0.5
  tail -c +"$((from + 1))" "$log" > "$out/$name.log"
  awk -v n="$name" -v a="$t0" -v b="$t1" 'BEGIN { printf "%-22s %7.3f s\n", n, b - a }'
}
x=(-X pg="$pg")
step status "$txhub" status "${x[@]}"
step list "$txhub" list "${x[@]}"
step list-prepared "$txhub" list --status prepared "${x[@]}"
step list-pending "$txhub" list --send-status pending "${x[@]}"
step list-failed "$txhub" list --send-status failed "${x[@]}"
step list-sent "$txhub" list --send-status sent --limit 10 "${x[@]}"
step list-biz "$txhub" list --biz shop7 "${x[@]}"
step list-tenant "$txhub" list --tenant team-a "${x[@]}"
step status-tenant "$txhub" status --tenant team-a "${x[@]}"
step show "$txhub" show shop7 o-9999907 "${x[@]}"
step purge-dry "$txhub" purge --older-than 13d20h --dry-run "${x[@]}"
step purge "$txhub" purge --older-than 13d20h "${x[@]}"
# a hub for a few seconds on an embedded broker: take, release, the due
# scans, retention (of what is older than 13d19h: a few batches)
broker_out=$(mktemp)
"$txhub" devbroker > "$broker_out" 2>/dev/null &
broker=$!
for _ in $(seq 50); do [ -s "$broker_out" ] && break; sleep 0.1; done
brokers=$(head -n 1 "$broker_out")
step hub timeout -s TERM 8 "$txhub" run "${x[@]}" -X brokers="$brokers" \
  -X retention.finished_hours=331 -X http.listen=
kill "$broker" 2>/dev/null || true
wait "$broker" 2>/dev/null || true
rm -f "$broker_out"
