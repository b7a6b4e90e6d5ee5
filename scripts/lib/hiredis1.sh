# shellcheck shell=bash
# hiredis 1.2 with TLS for scripts/test.sh --hiredis1 (sourced by it; uses its ROOT):
#
#   hiredis1_prepare DEPS_DIR INSTALL        # prints the library directory
#   hiredis1_check_loaded BUILD_DIR LIBDIR   # the test binaries load that library
#
# hiredis1_prepare unpacks Debian 13's libhiredis-dev and libhiredis1.1.0 (hiredis 1.2.0 with
# libhiredis_ssl) into DEPS_DIR with scripts/lib/extra_debs.sh (INSTALL=1; the system's apt sources
# and its hiredis 0.14 untouched) and writes pkg-config files that point there (the packaged ones say
# prefix=/usr, which would find the system's 0.14): DEPS_DIR/pkgconfig goes first on PKG_CONFIG_PATH.
# Each returns non-zero with a message on any failure, a package that cannot be fetched included.

# shellcheck source=SCRIPTDIR/extra_debs.sh
source "$ROOT/scripts/lib/extra_debs.sh"

# DEPS_DIR/pkgconfig/{hiredis,hiredis_ssl}.pc for the unpacked tree; prints the library directory.
hiredis1_pkgconfig() {
  local deps="$1" usr="$1/root/usr" multiarch
  multiarch="$(find "$usr/lib" -maxdepth 1 -name '*-linux-gnu*' -printf '%f\n' 2>/dev/null | head -n1)"
  local libdir="$usr/lib/$multiarch"
  if [[ -z "$multiarch" || ! -f "$usr/include/hiredis/hiredis_ssl.h" || ! -f "$libdir/pkgconfig/hiredis.pc" ]]; then
    echo "test.sh: no hiredis 1.2 with hiredis_ssl in $deps (drop --no-install to fetch it)" >&2
    return 1
  fi
  local pc="$deps/pkgconfig" version name
  version="$(sed -n 's/^Version: *//p' "$libdir/pkgconfig/hiredis.pc")"
  mkdir -p "$pc"
  for name in hiredis hiredis_ssl; do
    {
      echo "libdir=$libdir"
      echo "includedir=$usr/include"
      echo "Name: $name"
      echo "Description: $name $version, unpacked from Debian's packages for redlimit's tests"
      echo "Version: $version"
      if [[ $name == hiredis ]]; then
        echo "Libs: -L\${libdir} -lhiredis"
      else
        echo "Requires: hiredis"
        echo "Libs: -L\${libdir} -lhiredis_ssl"
        echo "Libs.private: -lssl -lcrypto"
      fi
      echo "Cflags: -I\${includedir} -D_FILE_OFFSET_BITS=64"
    } >"$pc/$name.pc"
  done
  echo "$libdir"
}

hiredis1_prepare() {
  local deps="$1" install="$2"
  if [[ $install -eq 1 ]]; then
    extra_debs test.sh "$deps" trixie libhiredis-dev libhiredis1.1.0 >&2 || return 1
  fi
  hiredis1_pkgconfig "$deps"
}

# The binaries must load the 1.2 library (their RPATH points at LIBDIR), not the system's 0.14: a
# build directory configured earlier against 0.14 keeps its cached pkg-config result.
hiredis1_check_loaded() {
  local build="$1" libdir="$2" bin loaded
  for bin in redlimit_unit_tests redlimit_integration_tests redlimit_tls_tests; do
    loaded="$(ldd "$build/tests/$bin" | awk '/libhiredis\.so/ { print $3 }')"
    if [[ "$loaded" != "$libdir"/* ]]; then
      echo "test.sh: $bin loads hiredis from '$loaded', not from $libdir (use a new build directory)" >&2
      return 1
    fi
  done
}
