# shellcheck shell=bash
# The hiredis 1.2 + TLS pass of scripts/test.sh (sourced by it; uses its ROOT, CMAKE_ARGS, JOBS,
# CTEST_JOBS and TEST_TIMEOUT):
#
#   hiredis1_pass DEPS_DIR BUILD_DIR INSTALL [ENV=VALUE...]
#
# Unpacks Debian 13's libhiredis-dev and libhiredis1.1.0 (hiredis 1.2.0 with libhiredis_ssl) into
# DEPS_DIR with scripts/lib/extra_debs.sh (INSTALL=1; the system's apt sources and its hiredis 0.14
# untouched), writes pkg-config files that point there (the packaged ones say prefix=/usr, which
# would find the system's 0.14), builds redlimit's unit, integration and TLS tests in BUILD_DIR
# against it, checks that the configure found TLS and that the binaries load hiredis 1.x, and runs
# the three suites (ctest labels unit, integration, tls). Returns non-zero with a message on any
# failure, a package that cannot be fetched included.

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

hiredis1_pass() {
  local deps="$1" build="$2" install="$3"
  shift 3
  local run_env=("$@")
  if [[ $install -eq 1 ]]; then
    extra_debs test.sh "$deps" trixie libhiredis-dev libhiredis1.1.0 || return 1
  fi
  local libdir
  libdir="$(hiredis1_pkgconfig "$deps")" || return 1

  local generator=()
  [[ -f "$build/CMakeCache.txt" ]] || generator=(-G Ninja)
  # REDLIMIT_WITH_TLS=ON: a build that did not find hiredis_ssl fails here, not silently later.
  PKG_CONFIG_PATH="$deps/pkgconfig" cmake -S "$ROOT" -B "$build" "${generator[@]}" "${CMAKE_ARGS[@]}" \
    -DREDLIMIT_WITH_TLS=ON -DREDLIMIT_BUILD_EXAMPLES=OFF -DREDLIMIT_TEST_VALKEY_SERVER= || return 1
  # Only what this pass runs (the fault, cluster and consumer suites run in the plain pass).
  # (the labels also take the CLI's test, labelled integration, and the accuracy tool's, labelled unit)
  # (and the micro benchmark's smoke run, labelled unit, where Google Benchmark was found)
  local targets=(redlimit_unit_tests redlimit_header_only_test redlimit_integration_tests redlimit_tls_tests
    redlimit_cli_tests redlimit_accuracy)
  if cmake --build "$build" --target help | grep -q '^redlimit_micro_smoke:'; then targets+=(redlimit_micro_smoke); fi
  cmake --build "$build" -j "${JOBS:-2}" --target "${targets[@]}" || return 1
  # The binaries must load the 1.2 library (their RPATH points at $libdir), not the system's 0.14.
  local bin loaded
  for bin in redlimit_unit_tests redlimit_integration_tests redlimit_tls_tests; do
    loaded="$(ldd "$build/tests/$bin" | awk '/libhiredis\.so/ { print $3 }')"
    if [[ "$loaded" != "$libdir"/* ]]; then
      echo "test.sh: $bin loads hiredis from '$loaded', not from $libdir" >&2
      return 1
    fi
  done
  rm -f "$build/Testing/Temporary/LastTest.log"  # test.sh summarises the failures of this run only
  (cd "$build" && env "${run_env[@]}" timeout --kill-after=30 "${TEST_TIMEOUT:-2400}" \
    ctest --output-on-failure --no-tests=error -j "${CTEST_JOBS:-2}" -L '^(unit|integration|tls)$')
}
