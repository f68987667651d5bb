#!/bin/sh
# promtool.sh ARG...: Prometheus' promtool, or a failure that says how to
# get it (Debian's prometheus package; deploy/dev.sh installs it).
command -v promtool >/dev/null 2>&1 ||
  { echo "promtool not found: apt-get install prometheus (deploy/dev.sh test installs it)" >&2; exit 1; }
exec promtool "$@"
