#!/usr/bin/env bash
# Consumer tests: redlimit used the four ways a user consumes it. Each builds and runs main.cpp (a
# fixed window on the in-memory backend: no Redis needed) and must print "allowed, allowed, rejected".
#
#   tests/consumer/run.sh BUILD_DIR      # BUILD_DIR: a configured and built redlimit build tree
#
#   find_package     cmake --install BUILD_DIR --prefix <tmp>/prefix (not a system prefix), then a
#                    project with find_package(redlimit CONFIG) and CMAKE_PREFIX_PATH, redlimit::redlimit
#   header_only      the same installed prefix, redlimit::header_only
#   add_subdirectory redlimit's source tree vendored with add_subdirectory (builds the library only)
#   pkg_config       c++ -std=c++17 main.cpp $(pkg-config --cflags --libs --static redlimit), with
#                    PKG_CONFIG_PATH=<prefix>/<libdir>/pkgconfig
#   cli              the installed command-line tool, <prefix>/bin/redlimit: `check --json` of a rate
#                    (no Redis needed) answers the canonical form
#
# The installed consumers must take every redlimit header from <prefix>/include: neither the source
# tree's include/ nor a redlimit in /usr or /usr/local may stand in for a broken package. Prints one
# line per consumer; exits non-zero if any fails (its log is printed). Works in a directory under /tmp,
# removed at exit. Uses the build tree's compiler (and its compiler launcher, e.g. ccache), Ninja.
# Env: CONSUMERS (a subset, e.g. "find_package pkg_config"), JOBS (default 2); PKG_CONFIG_PATH and
# LD_LIBRARY_PATH where redlimit's dependencies are not the system's (scripts/test.sh --hiredis1).
set -euo pipefail

usage() { sed -n '2,21s/^# \{0,1\}//p' "$0"; }

if [[ $# -ne 1 || "$1" == -h || "$1" == --help ]]; then
  usage >&2
  exit 2
fi
BUILD_DIR="$(cd "$1" && pwd)"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SOURCE_DIR="$(cd "$HERE/../.." && pwd)"
JOBS="${JOBS:-2}"
read -r -a CONSUMERS <<<"${CONSUMERS:-find_package header_only add_subdirectory pkg_config cli}"

[[ -f "$BUILD_DIR/CMakeCache.txt" ]] || { echo "consumer: $BUILD_DIR is not a CMake build tree" >&2; exit 2; }
for tool in cmake ninja pkg-config; do
  command -v "$tool" >/dev/null 2>&1 || { echo "consumer: $tool is needed" >&2; exit 2; }
done

cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD_DIR/CMakeCache.txt" | head -n 1; }
CXX="$(cache_value CMAKE_CXX_COMPILER)"
CXX="${CXX:-c++}"
LAUNCHER="$(cache_value CMAKE_CXX_COMPILER_LAUNCHER)"
# No build type (no optimization flags): what these check is how the package is found, included and
# linked, and add_subdirectory compiles the whole library, which at -O3 takes several times as long.
CMAKE_ARGS=(-G Ninja -DCMAKE_BUILD_TYPE= -DCMAKE_CXX_COMPILER="$CXX")
[[ -n "$LAUNCHER" ]] && CMAKE_ARGS+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$LAUNCHER")

TMP="$(mktemp -d /tmp/redlimit-consumer.XXXXXX)"
trap 'rm -rf "$TMP"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
PREFIX="$TMP/prefix"

# Every redlimit header in the dependency list $1 (make or `ninja -t deps` format) must be under
# $2/redlimit/, and $2/redlimit/redlimit.hpp must be one of them.
check_headers() {
  local deps="$1" root="$2" headers stray
  headers="$(tr -s ' \\\t' '\n' <"$deps" | grep -E '/redlimit/.*\.hpp$' | sort -u || true)"
  if ! grep -qxF "$root/redlimit/redlimit.hpp" <<<"$headers"; then
    echo "consumer: redlimit/redlimit.hpp was not taken from $root; redlimit headers used:" >&2
    printf '%s\n' "${headers:-(none)}" >&2
    return 1
  fi
  stray="$(grep -vF "$root/redlimit/" <<<"$headers" || true)"
  if [[ -n "$stray" ]]; then
    echo "consumer: redlimit headers from outside $root:" >&2
    printf '%s\n' "$stray" >&2
    return 1
  fi
}

# The installed consumers share one `cmake --install`, done before them (see the end of this file).
INSTALLED=no
installed_ok() {
  [[ "$INSTALLED" == ok ]] && return 0
  echo "consumer: cmake --install $BUILD_DIR --prefix $PREFIX failed:" >&2
  cat "$TMP/install.log" >&2
  return 1
}

run_program() {
  local out
  out="$("$1")" || return 1
  echo "$out"
  [[ "$out" == "allowed, allowed, rejected" ]]
}

# find_package from the installed prefix, linking target $1.
consume_installed() {
  local target="$1" dir="$TMP/build-${1#redlimit::}" found
  installed_ok || return 1
  cmake -S "$HERE/find_package" -B "$dir" "${CMAKE_ARGS[@]}" -DCMAKE_PREFIX_PATH="$PREFIX" \
    -DREDLIMIT_TARGET="$target"
  found="$(sed -n 's/^redlimit_DIR:[A-Z]*=//p' "$dir/CMakeCache.txt")"
  if [[ "$found" != "$PREFIX"/* ]]; then
    echo "consumer: find_package found redlimit in '$found', not under $PREFIX" >&2
    return 1
  fi
  cmake --build "$dir" -j "$JOBS"
  ninja -C "$dir" -t deps >"$dir/deps.txt"
  check_headers "$dir/deps.txt" "$PREFIX/include"
  run_program "$dir/consumer"
}

consume_find_package() { consume_installed redlimit::redlimit; }
consume_header_only() { consume_installed redlimit::header_only; }

consume_add_subdirectory() {
  local dir="$TMP/build-add_subdirectory"
  # With ccache, paths under the temp dir count as relative, so a rerun reuses the last run's objects.
  [[ "$LAUNCHER" == *ccache* ]] && export CCACHE_BASEDIR="$TMP"
  cmake -S "$HERE/add_subdirectory" -B "$dir" "${CMAKE_ARGS[@]}" -DREDLIMIT_SOURCE_DIR="$SOURCE_DIR"
  cmake --build "$dir" -j "$JOBS" --target consumer
  run_program "$dir/consumer"
}

consume_pkg_config() {
  local dir="$TMP/build-pkg_config" pc flags
  installed_ok || return 1
  pc="$(find "$PREFIX" -name redlimit.pc -path '*/pkgconfig/*' | head -n 1)"
  [[ -n "$pc" ]] || { echo "consumer: no redlimit.pc under $PREFIX" >&2; return 1; }
  mkdir -p "$dir"
  # The caller's path after ours: a hiredis of its own (scripts/test.sh --hiredis1) is found there.
  flags="$(PKG_CONFIG_PATH="$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" pkg-config --cflags --libs \
    --static redlimit)" || return 1
  echo "pkg-config --cflags --libs --static redlimit: $flags"
  # shellcheck disable=SC2086  # the flags are words
  (set -x && "$CXX" -std=c++17 -O2 -MD -MF "$dir/main.d" "$HERE/main.cpp" -o "$dir/consumer" $flags)
  check_headers "$dir/main.d" "$PREFIX/include"
  run_program "$dir/consumer"
}

# The tool installed with the package (REDLIMIT_BUILD_CLI, on for a top-level build).
consume_cli() {
  local out
  installed_ok || return 1
  [[ -x "$PREFIX/bin/redlimit" ]] || { echo "consumer: no $PREFIX/bin/redlimit" >&2; return 1; }
  out="$("$PREFIX/bin/redlimit" check --json '10/s; 300/1m')"
  echo "$out"
  [[ "$out" == '{"canonical":"10/1s; 300/1m","limits":2}' ]]
}

for name in "${CONSUMERS[@]}"; do
  if ! declare -F "consume_$name" >/dev/null; then
    echo "consumer: unknown consumer '$name' (known: find_package header_only add_subdirectory pkg_config cli)" >&2
    exit 2
  fi
done
if [[ " ${CONSUMERS[*]} " =~ \ (find_package|header_only|pkg_config|cli)\  ]]; then
  cmake --install "$BUILD_DIR" --prefix "$PREFIX" >"$TMP/install.log" 2>&1 && INSTALLED=ok
fi

failed=()
for name in "${CONSUMERS[@]}"; do
  log="$TMP/$name.log"
  start=$SECONDS
  # A plain command (not an if or || operand), so that set -e stops the consumer at its first failure.
  set +e
  (set -e; "consume_$name") >"$log" 2>&1
  status=$?
  set -e
  if [[ $status -eq 0 ]]; then
    printf 'consumer %-17s ok (%d s)\n' "$name" "$((SECONDS - start))"
  else
    printf 'consumer %-17s FAILED (%d s)\n' "$name" "$((SECONDS - start))"
    echo "---- last lines of the $name consumer's log ----" >&2
    tail -n 40 "$log" >&2
    failed+=("$name")
  fi
done
echo "consumer tests: $((${#CONSUMERS[@]} - ${#failed[@]})) of ${#CONSUMERS[@]} ok in $SECONDS s"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "consumer: failures in: ${failed[*]}" >&2
  exit 1
fi
