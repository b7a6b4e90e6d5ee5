# shellcheck shell=bash
# The hiredis 1.2 pass of scripts/test.sh (sourced by it; uses its ROOT, CMAKE_ARGS, JOBS, CTEST_JOBS
# and TEST_TIMEOUT):
#
#   hiredis1_pass DEPS_DIR BUILD_DIR INSTALL [ENV=VALUE...]
#
# Unpacks Debian 13's libhiredis-dev and libhiredis1.1.0 into DEPS_DIR (scripts/lib/extra_debs.sh,
# with INSTALL=1), writes pkg-config files that point there (the packaged ones say prefix=/usr, which
# would find the system's hiredis 0.14), builds redlimit with its tests in BUILD_DIR against them,
# checks that the test binaries load hiredis 1.x, and runs the unit and integration suites.

# shellcheck source=SCRIPTDIR/extra_debs.sh
source "$ROOT/scripts/lib/extra_debs.sh"

hiredis1_pass() {
  local deps="$1" build="$2" install="$3"
  shift 3
  local run_env=("$@")
  if [[ $install -eq 1 ]]; then
    extra_debs test.sh "$deps" trixie libhiredis-dev libhiredis1.1.0 || return 1
  fi
  local usr="$deps/root/usr" multiarch
  multiarch="$(ls "$usr/lib" 2>/dev/null | grep -- '-linux-gnu$' | head -n1)"
  if [[ -z "$multiarch" || ! -f "$usr/include/hiredis/hiredis.h" ]]; then
    echo "test.sh: no hiredis 1.2 in $deps (drop --no-install to fetch it, or HIREDIS1=0 to skip)" >&2
    return 1
  fi
  local pc="$deps/pkgconfig" libdir="$usr/lib/$multiarch" version
  version="$(sed -n 's/^Version: *//p' "$libdir/pkgconfig/hiredis.pc")"
  mkdir -p "$pc"
  local name
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
      echo "Cflags: -I\${includedir}/hiredis -I\${includedir} -D_FILE_OFFSET_BITS=64"
    } >"$pc/$name.pc"
  done

  local generator=()
  [[ -f "$build/CMakeCache.txt" ]] || generator=(-G Ninja)
  PKG_CONFIG_PATH="$pc" cmake -S "$ROOT" -B "$build" "${generator[@]}" "${CMAKE_ARGS[@]}" \
    -DREDLIMIT_TEST_VALKEY_SERVER= || return 1
  cmake --build "$build" -j "${JOBS:-2}" || return 1
  # The binaries must load the 1.2 library (their RPATH points at $libdir), not the system's 0.14.
  local bin loaded
  for bin in "$build/tests/redlimit_unit_tests" "$build/tests/redlimit_integration_tests"; do
    loaded="$(ldd "$bin" | awk '/libhiredis/ { print $3 }')"
    if [[ "$loaded" != "$libdir"/* ]]; then
      echo "test.sh: $bin loads hiredis from '$loaded', not from $libdir" >&2
      return 1
    fi
  done
  (cd "$build" && env "${run_env[@]}" timeout --kill-after=30 "${TEST_TIMEOUT:-2400}" \
    ctest --output-on-failure --no-tests=error -j "${CTEST_JOBS:-2}" -L 'unit|integration')
}
