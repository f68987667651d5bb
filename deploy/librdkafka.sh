#!/usr/bin/env bash
# A current librdkafka beside Debian's, for building and testing txhub
# against it. Builds upstream's release from the source tarball in
# ../shared/deps/ (or $TXHUB_LIBRDKAFKA_TARBALL) with its own configure and
# make, into a cache outside the repository, as deploy/kafka.sh caches
# Kafka's jars: ${TXHUB_LIBRDKAFKA_CACHE:-~/.cache/txhub}/librdkafka-<version>.
# Nothing of librdkafka is copied into the project.
#
#   deploy/librdkafka.sh build    build and install it into the cache (once;
#                                 about 4 minutes on 2 cores), print the
#                                 directory of its pkg-config files
#   deploy/librdkafka.sh pkgconfig
#                                 print that directory (building it first if
#                                 needed): PKG_CONFIG_PATH for `meson setup`
#
# A build of txhub against it:
#   PKG_CONFIG_PATH=$(deploy/librdkafka.sh pkgconfig) meson setup build-rdk
# meson puts the cache's lib/ on the binaries' run path in the build tree;
# an installed txhub finds it through the system's loader (ldconfig) or
# LD_LIBRARY_PATH. `txhub version` names the librdkafka it runs with.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=2.15.0
sha256=e91615f7ca9111f9e83109ce4b91036477620791f76810c21e143460ac6c2b84
tarball=${TXHUB_LIBRDKAFKA_TARBALL:-$here/../../shared/deps/librdkafka-$version.tar.gz}
. "$here/packages.sh"
cache=${TXHUB_LIBRDKAFKA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/txhub}/librdkafka-$version

# what its configure finds for SASL/SCRAM, TLS, zstd, lz4 and zlib
need() {
  install_missing gcc g++ make pkg-config python3 libssl-dev libsasl2-dev zlib1g-dev libzstd-dev \
    liblz4-dev libcurl4-openssl-dev
}

build() {
  [ -f "$cache/.complete" ] && return 0
  [ -f "$tarball" ] || { echo "librdkafka.sh: no $tarball (see shared/deps/README.md)" >&2; exit 1; }
  echo "$sha256  $tarball" | sha256sum -c --quiet - ||
    { echo "librdkafka.sh: $tarball is not upstream's v$version" >&2; exit 1; }
  need
  echo "librdkafka.sh: building librdkafka $version into $cache" >&2
  local src logs
  src=$(mktemp -d "${TMPDIR:-/tmp}/librdkafka.XXXXXX")
  # the logs outside the tree: its configure takes every configure.* there for a module
  logs=$(mktemp -d "${TMPDIR:-/tmp}/librdkafka-logs.XXXXXX")
  trap 'rm -rf "$src" "$logs"' RETURN
  tar -xzf "$tarball" -C "$src" --strip-components=1
  rm -rf "$cache.tmp"
  ( cd "$src" &&
    ./configure --prefix="$cache.tmp" >"$logs/configure.txt" 2>&1 ||
      { tail -30 "$logs/configure.txt" >&2; exit 1; }
    make -j"$(nproc)" libs >"$logs/make.txt" 2>&1 || { tail -30 "$logs/make.txt" >&2; exit 1; }
    make install-subdirs >"$logs/install.txt" 2>&1 || { tail -30 "$logs/install.txt" >&2; exit 1; } )
  # configure wrote the prefix into the .pc files: make them point at the cache
  sed -i "s:$cache.tmp:$cache:g" "$cache.tmp"/lib/pkgconfig/*.pc
  rm -rf "$cache"
  mv "$cache.tmp" "$cache"
  touch "$cache/.complete"
}

case "${1:-}" in
  build) build; echo "$cache/lib/pkgconfig" ;;
  pkgconfig) build; echo "$cache/lib/pkgconfig" ;;
  *) echo "usage: deploy/librdkafka.sh build | pkgconfig" >&2; exit 2 ;;
esac
