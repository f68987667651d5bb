#!/bin/sh
# The client library's exported names (suite unit, clients): every symbol
# the static archive and the shared library define for the world begins
# with txhub_ (the API) or, in the archive only, txhubi_ (helpers shared by
# its sources and the hub, client/internal.h); the shared library exports
# txhub_* alone (client/libtxhub.map). A program linking libtxhub.a can so
# have its own utf8_valid or trace_id_of.
#
#   tests/clients/symbols.sh LIBTXHUB_A LIBTXHUB_SO
set -eu
a=$1 so=$2
rc=0
bad=$(nm -g --defined-only "$a" | awk 'NF == 3 { print $3 }' | grep -v -E '^txhubi?_' || true)
if [ -n "$bad" ]; then
  echo "symbols: $a defines names without the txhub_ or txhubi_ prefix:" >&2
  printf '  %s\n' $bad >&2
  rc=1
fi
bad=$(nm -D --defined-only "$so" | awk 'NF == 3 && $3 !~ /^TXHUB_[0-9]/ { print $3 }' |
      sed 's/@.*//' | grep -v -E '^txhub_' || true)
if [ -n "$bad" ]; then
  echo "symbols: $so exports names other than txhub_*:" >&2
  printf '  %s\n' $bad >&2
  rc=1
fi
n=$(nm -g --defined-only "$a" | awk 'NF == 3' | grep -c -E ' txhub_' || true)
[ "$n" -gt 0 ] || { echo "symbols: $a defines no txhub_ symbol at all" >&2; rc=1; }
[ "$rc" = 0 ] && echo "symbols: $n txhub_ symbols, none unprefixed"
exit $rc
