#!/usr/bin/env bash
# What docs/producers.md: Producing from C and Producing from Python promise,
# as a user would do it: `meson install` the build into a temporary DESTDIR,
# build a C program with nothing but `pkg-config --cflags --libs txhub` from there and run it with
# LD_LIBRARY_PATH pointed there; `pip install clients/python` into a fresh
# virtual environment and run a Python program with it. Each runs one
# transaction against a hub, which must commit and forward it.
#
#   tests/clients/install_test.sh BUILD_DIR     (inside tests/with-services.sh)
set -euo pipefail
unset LD_LIBRARY_PATH   # meson test points it at the build tree: only the installed copy may count
build=$(realpath "$1")
src=$(cd "$(dirname "$0")/../.." && pwd)
: "${TXHUB_PG:?run inside tests/with-services.sh}" "${TXHUB_BROKERS:?}"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/txhub-install.XXXXXX")
hub_pid=""
cleanup() {
  [ -n "$hub_pid" ] && kill "$hub_pid" 2>/dev/null && wait "$hub_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

# 1. meson install, and a pkg-config file that points into the DESTDIR
meson install -C "$build" --no-rebuild --quiet --destdir "$tmp/dest" >/dev/null
pc=$(find "$tmp/dest" -name txhub.pc)
[ -n "$pc" ] || { echo "install_test: no txhub.pc installed" >&2; exit 1; }
prefix=$(sed -n 's/^prefix=//p' "$pc")
sed -i "s|^prefix=.*|prefix=$tmp/dest$prefix|" "$pc"   # what a relocated prefix looks like
export PKG_CONFIG_PATH=$(dirname "$pc")
libdir=$(pkg-config --variable=libdir txhub)
soname=$(readelf -d "$libdir/libtxhub.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
echo "install_test: installed $(pkg-config --modversion txhub), soname $soname, headers $(ls "$tmp/dest$prefix/include/txhub" | tr '\n' ' ')"
# the man pages, with every command and key (tests/docs/check_docs.py)
man1=$(find "$tmp/dest" -path '*/man1/txhub.1')
man5=$(find "$tmp/dest" -path '*/man5/txhub.conf.5')
[ -n "$man1" ] && [ -n "$man5" ] || { echo "install_test: txhub.1 or txhub.conf.5 not installed" >&2; exit 1; }
/usr/bin/python3 "$src/tests/docs/check_docs.py" "$build/txhub" "$man1" "$man5" "$src"

# 2. a database and a hub of our own
db="install_$$"
psql "$TXHUB_PG" -qc "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
pg="$TXHUB_PG dbname=$db"
topic="ctl.$db"
fwd="fw.$db"
settings=(-X "pg=$pg" -X "brokers=$TXHUB_BROKERS" -X "control_topic=$topic" -X "group=$db")
"$build/txhub" migrate "${settings[@]}" 2>"$tmp/migrate.log" || { cat "$tmp/migrate.log" >&2; exit 1; }
"$build/txhub" run "${settings[@]}" >"$tmp/hub.log" 2>&1 &
hub_pid=$!
export CONTROL_TOPIC=$topic FORWARD_TOPIC=$fwd

wait_sent() {
  for _ in $(seq 1 600); do
    [ "$(psql "$pg" -tAc "SELECT status || '/' || send_status FROM txhub.messages WHERE message_key = '$1'")" = committed/sent ] && return 0
    sleep 0.1
  done
  echo "install_test: $1 was not committed and forwarded" >&2
  cat "$tmp/hub.log" >&2
  return 1
}

# 3. C: pkg-config only
cc -o "$tmp/one_tx" "$src/tests/clients/install_program.c" $(pkg-config --cflags --libs txhub)
LD_LIBRARY_PATH=$libdir MESSAGE_KEY=c-installed "$tmp/one_tx"
loaded=$(LD_LIBRARY_PATH=$libdir ldd "$tmp/one_tx")   # (not piped into grep -q: SIGPIPE under pipefail)
[[ $loaded == *"$libdir/$soname"* ]] ||
  { echo "install_test: the program did not load the installed $soname: $loaded" >&2; exit 1; }
wait_sent c-installed

# 4. Python: pip install clients/python into a fresh virtual environment.
# Debian's python with its packages visible (confluent-kafka, psycopg,
# setuptools), and no registry: what pip needs must be there already.
/usr/bin/python3 -m venv --system-site-packages "$tmp/venv"
cp -r "$src/clients/python" "$tmp/pkg"   # pip builds in place; keep the tree clean
"$tmp/venv/bin/pip" install --quiet --no-index --no-build-isolation "$tmp/pkg"
(cd "$tmp" && VENV="$tmp/venv" MESSAGE_KEY=py-installed "$tmp/venv/bin/python" "$src/tests/clients/install_program.py")
wait_sent py-installed
kill "$hub_pid"
wait "$hub_pid" || { echo "install_test: the hub did not stop cleanly" >&2; exit 1; }
hub_pid=""
echo "install_test: 2 passed, 0 failed"
