#!/usr/bin/env bash
# Build tidepool's C API (release) and install it under PREFIX (default /usr/local):
#   PREFIX/lib/libtidepool.so.VERSION      the shared library
#   PREFIX/lib/SONAME -> libtidepool.so.VERSION   what programs load (libtidepool.so.0.MINOR
#                                          while the major version is 0, then .so.MAJOR)
#   PREFIX/lib/libtidepool.so -> SONAME    what `-ltidepool` finds when linking
#   PREFIX/lib/libtidepool.a               the static library
#   PREFIX/include/tidepool.h, PREFIX/include/threadpool.h
#   PREFIX/lib/pkgconfig/tidepool.pc
# Then: cc app.c $(PKG_CONFIG_PATH=PREFIX/lib/pkgconfig pkg-config --cflags --libs tidepool)
# TIDEPOOL_CAPI_LIB_DIR=DIR installs the libraries already built in DIR instead
# of building (the tests use it). Linux only (.so); needs readelf (binutils).
set -euo pipefail
cd "$(dirname "$0")/.."

prefix="${1:-/usr/local}"
lib_dir="${TIDEPOOL_CAPI_LIB_DIR:-}"
if [ -z "$lib_dir" ]; then
  cargo build --release --locked -p tidepool-capi
  lib_dir="${CARGO_TARGET_DIR:-target}/release"
fi
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
# The SONAME is set when the library is linked (crates/tidepool-capi/build.rs).
soname=$(readelf -d "$lib_dir/libtidepool_capi.so" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
if [ -z "$soname" ]; then
  echo "install-capi.sh: $lib_dir/libtidepool_capi.so has no SONAME" >&2
  exit 1
fi

install -d "$prefix/lib/pkgconfig" "$prefix/include"
install -m 644 crates/tidepool-capi/include/tidepool.h crates/tidepool-capi/include/threadpool.h "$prefix/include/"
install -m 755 "$lib_dir/libtidepool_capi.so" "$prefix/lib/libtidepool.so.$version"
ln -sfn "libtidepool.so.$version" "$prefix/lib/$soname"
ln -sfn "$soname" "$prefix/lib/libtidepool.so"
install -m 644 "$lib_dir/libtidepool_capi.a" "$prefix/lib/libtidepool.a"
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" crates/tidepool-capi/tidepool.pc.in \
  > "$prefix/lib/pkgconfig/tidepool.pc"
echo "installed tidepool $version C API ($soname) under $prefix"
