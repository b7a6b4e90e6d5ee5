#!/usr/bin/env bash
# The project's one test command: installs what is missing, builds, runs every test (unit,
# integration, faults, cluster, sentinel); exits non-zero on any failure or sanitizer report.
#
#   scripts/test.sh                     # build in build/ (or $BUILD_DIR), run ctest, the consumer
#                                       # tests (tests/consumer/run.sh), then fuzz briefly
#   scripts/test.sh --sanitize asan     # AddressSanitizer + UBSan build in build-asan/
#   scripts/test.sh --sanitize tsan     # ThreadSanitizer build in build-tsan/
#   scripts/test.sh --hiredis1          # against hiredis 1.2 with TLS, adding the TLS suite; with
#                                       # --sanitize asan in build-asan-hiredis1/ (CI's second pass)
#   scripts/test.sh --no-install        # never call apt-get (fail if something is missing)
#   scripts/test.sh --no-fuzz           # skip the bounded libFuzzer run (scripts/fuzz.sh)
#   scripts/test.sh -- -R integration   # anything after -- goes to ctest
#
# On Debian (12) it installs the missing build and test packages with apt-get (as root, or with sudo).
# The integration tests start their own throwaway redis-server on free loopback ports (never a
# server someone else runs, never 6379 on purpose); none of them survives this script. The plain
# pass runs the integration, fault, Sentinel and Cluster suites a second time on Valkey 8, unpacked from
# Debian 12's backports suite into build-deps/ (scripts/lib/extra_debs.sh; the system's apt sources
# untouched), and the integration, fault, Sentinel and Cluster suites on Redis 6.0 from Debian 11
# (scripts/lib/redis6.sh).
# --hiredis1 builds against hiredis 1.2 with TLS from Debian 13's packages, unpacked the same way
# (scripts/lib/hiredis1.sh), which adds the TLS suite (tests/tls) to every other.
# Env: BUILD_DIR, JOBS (build parallelism, default 2), CTEST_JOBS (default 2), TEST_TIMEOUT
# (seconds for the whole ctest run, default 2400), REDIS_SERVER (redis-server binary to test with),
# FUZZ_SECONDS (per fuzz target, default 15), FUZZ_BUILD_DIR (the fuzzers' clang build, default
# $BUILD_DIR-fuzz: never the build directory itself), REDLIMIT_WERROR (ON: warnings in redlimit's own
# code fail the build), VALKEY_SERVER (a valkey-server binary to use instead of fetching one),
# DEPS_DIR (where fetched packages go, default build-deps/).
set -euo pipefail

usage() {
  sed -n '2,28s/^# \{0,1\}//p' "$0"
}

SANITIZE=""
INSTALL=1
FUZZ=1
HIREDIS1=0
CTEST_ARGS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --sanitize)
      [[ $# -ge 2 ]] || { echo "test.sh: --sanitize needs asan or tsan" >&2; exit 2; }
      SANITIZE="$2"
      shift 2
      ;;
    --sanitize=*)
      SANITIZE="${1#--sanitize=}"
      shift
      ;;
    --no-install)
      INSTALL=0
      shift
      ;;
    --no-fuzz)
      FUZZ=0
      shift
      ;;
    --hiredis1)
      HIREDIS1=1
      shift
      ;;
    -h | --help)
      usage
      exit 0
      ;;
    --)
      shift
      CTEST_ARGS=("$@")
      break
      ;;
    *)
      echo "test.sh: unknown argument: $1" >&2
      usage >&2
      exit 2
      ;;
  esac
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

step() { printf '\n==> %s\n' "$*"; }

# ---- 1. Packages ---------------------------------------------------------------------------------
# redis-server also runs the sentinels of tests/sentinel (--sentinel); libcpp-httplib-dev builds the
# HTTP service example and its test; libjemalloc2 and liblzf1 are Valkey's libraries (the Valkey
# pass); libssl-dev and openssl serve the hiredis 1.2 + TLS pass (headers; the certificates' tool).
# libbenchmark-dev builds benchmarks/micro_bench.cpp, which the tests run briefly (micro_bench_runs).
# lua5.1 runs the policy script's common paths against its general path (tests/lua, lua_common_paths).
PACKAGES=(build-essential cmake ninja-build pkg-config libhiredis-dev libfmt-dev libevent-dev libuv1-dev
  libgtest-dev libgmock-dev googletest redis-server redis-tools python3 libcpp-httplib-dev
  libjemalloc2 liblzf1 libssl-dev openssl libbenchmark-dev lua5.1)

# shellcheck source=SCRIPTDIR/lib/install.sh
source "$ROOT/scripts/lib/install.sh"
install_missing test.sh "$INSTALL" "${PACKAGES[@]}"

# Valkey 8 for the plain pass (the sanitizer passes test against Redis only): Debian 12 has it in
# its backports suite, fetched without touching the system's apt configuration.
VALKEY_ARGS=()
if [[ -z "$SANITIZE" ]]; then
  if [[ -z "${VALKEY_SERVER:-}" ]]; then
    deps="${DEPS_DIR:-$ROOT/build-deps}/valkey"
    if [[ $INSTALL -eq 1 ]]; then
      # shellcheck source=SCRIPTDIR/lib/extra_debs.sh
      source "$ROOT/scripts/lib/extra_debs.sh"
      extra_debs test.sh "$deps" bookworm-backports valkey-server valkey-tools || exit 1
    fi
    VALKEY_SERVER="$deps/root/usr/bin/valkey-server"
  fi
  if ! "$VALKEY_SERVER" --version >/dev/null 2>&1; then
    echo "test.sh: no usable valkey-server at $VALKEY_SERVER (drop --no-install to fetch it, or set VALKEY_SERVER)" >&2
    exit 1
  fi
  VALKEY_ARGS=("-DREDLIMIT_TEST_VALKEY_SERVER=$VALKEY_SERVER")
else
  VALKEY_ARGS=("-DREDLIMIT_TEST_VALKEY_SERVER=")
fi

# Redis 6.0 for the plain pass (integration_redis6, faults_redis6, sentinel_redis6, cluster_redis6:
# servers older than 7.0 take the scripts without their shebang line): Debian 11's, fetched the same
# way (scripts/lib/redis6.sh).
REDIS6_ARGS=("-DREDLIMIT_TEST_REDIS6_SERVER=")
if [[ -z "$SANITIZE" ]]; then
  redis6_deps="${DEPS_DIR:-$ROOT/build-deps}/redis6"
  if [[ $INSTALL -eq 1 ]]; then
    # shellcheck source=SCRIPTDIR/lib/extra_debs.sh
    source "$ROOT/scripts/lib/extra_debs.sh"
    # shellcheck source=SCRIPTDIR/lib/redis6.sh
    source "$ROOT/scripts/lib/redis6.sh"
    redis6_server "$redis6_deps" >/dev/null || exit 1
  fi
  if ! "$redis6_deps/redis-server" --version 2>/dev/null | grep -q ' v=6\.'; then
    echo "test.sh: no usable Redis 6 at $redis6_deps/redis-server (drop --no-install to fetch it)" >&2
    exit 1
  fi
  REDIS6_ARGS=("-DREDLIMIT_TEST_REDIS6_SERVER=$redis6_deps/redis-server")
fi

# hiredis 1.2 with TLS (--hiredis1): found through pkg-config files of our own, first on the path.
HIREDIS1_ARGS=()
if [[ $HIREDIS1 -eq 1 ]]; then
  # shellcheck source=SCRIPTDIR/lib/hiredis1.sh
  source "$ROOT/scripts/lib/hiredis1.sh"
  hiredis1_deps="${DEPS_DIR:-$ROOT/build-deps}/hiredis-1.2"
  HIREDIS1_LIBDIR="$(hiredis1_prepare "$hiredis1_deps" "$INSTALL")" || exit 1
  export PKG_CONFIG_PATH="$hiredis1_deps/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  # ON: a configure that did not find hiredis_ssl fails here, not silently later.
  HIREDIS1_ARGS=(-DREDLIMIT_WITH_TLS=ON)
fi

# ---- 2. Configure and build ----------------------------------------------------------------------
# Compiling is most of each pass on 2 cores. Line tables only (-g1) in every pass: stack traces
# with file and line, at about 70% of the compile time of -g. The sanitizer builds optimize less:
# TSan at -O1 (a file of the unit suite, decision_test.cpp: 19 s, against 30 at -O2 -g); ASan with
# GCC's UBSan at -Og, as its checks make -O1 cost 2.5 times -O0 (the same file: 46 s at -O1, 26 at
# -Og, 18 at -O0), and -Og runs close to -O1.
CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DREDLIMIT_BUILD_TESTS=ON "-DREDLIMIT_WERROR=${REDLIMIT_WERROR:-ON}"
  "${HIREDIS1_ARGS[@]}")
OPT="-O2 -g1"
RUN_ENV=()
suffix=""
[[ $HIREDIS1 -eq 0 ]] || suffix="-hiredis1"
case "$SANITIZE" in
  "")
    BUILD_DIR="${BUILD_DIR:-$ROOT/build$suffix}"
    ;;
  asan)
    BUILD_DIR="${BUILD_DIR:-$ROOT/build-asan$suffix}"
    flags="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
    CMAKE_ARGS+=("-DCMAKE_CXX_FLAGS=$flags" "-DCMAKE_EXE_LINKER_FLAGS=$flags" "-DCMAKE_SHARED_LINKER_FLAGS=$flags")
    OPT="-Og -g1"
    RUN_ENV+=("ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=0:strict_string_checks=1}"
      "UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}")
    ;;
  tsan)
    BUILD_DIR="${BUILD_DIR:-$ROOT/build-tsan$suffix}"
    flags="-fsanitize=thread -fno-omit-frame-pointer"
    CMAKE_ARGS+=("-DCMAKE_CXX_FLAGS=$flags" "-DCMAKE_EXE_LINKER_FLAGS=$flags" "-DCMAKE_SHARED_LINKER_FLAGS=$flags")
    OPT="-O1 -g1"
    # tests/tsan.supp: libstdc++'s exception_ptr refcount, which TSan cannot see (see the file).
    RUN_ENV+=("TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$ROOT/tests/tsan.supp}")
    ;;
  *)
    echo "test.sh: --sanitize takes asan or tsan, not '$SANITIZE'" >&2
    exit 2
    ;;
esac
CMAKE_ARGS+=("-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$OPT -DNDEBUG")
# Two tests are a round trip a step, and a sanitizer makes each step slower: the sanitizer passes run
# them at their short counts (REDLIMIT_TEST_SHORT: tests/CMakeLists.txt says which and why), the
# plain pass in full.
CMAKE_ARGS+=("-DREDLIMIT_TEST_SHORT=$([[ -n "$SANITIZE" ]] && echo ON || echo OFF)")

# Keep the generator of an existing build directory; Ninja for a new one.
if [[ -f "$BUILD_DIR/CMakeCache.txt" ]]; then
  GENERATOR_ARGS=()
else
  GENERATOR_ARGS=(-G Ninja)
fi

step "Configuring in $BUILD_DIR${SANITIZE:+ (sanitizer: $SANITIZE)}"
cmake -S "$ROOT" -B "$BUILD_DIR" "${GENERATOR_ARGS[@]}" "${CMAKE_ARGS[@]}" "${VALKEY_ARGS[@]}" "${REDIS6_ARGS[@]}"

step "Building (-j${JOBS:-2})"
cmake --build "$BUILD_DIR" -j "${JOBS:-2}"
if [[ $HIREDIS1 -eq 1 ]]; then
  hiredis1_check_loaded "$BUILD_DIR" "$HIREDIS1_LIBDIR" || exit 1
fi

# ---- 3. Test -------------------------------------------------------------------------------------
# The test harness writes the pid of every redis-server it starts into this directory (and removes
# it when the server stops). Anything still listed at exit is ours and is stopped, by pid only.
# Their private directories (socket, log) go under RUN_TMP, removed at exit even when a test binary
# was killed before its destructors ran. /tmp, not $TMPDIR: unix socket paths must stay short.
RUN_TMP="$(mktemp -d /tmp/redlimit-run.XXXXXX)"
PIDDIR="$RUN_TMP/pids"
mkdir "$PIDDIR"
export REDLIMIT_TEST_PIDDIR="$PIDDIR" REDLIMIT_TEST_TMPDIR="$RUN_TMP"

# shellcheck disable=SC2317  # called from the EXIT trap
stop_leftover_servers() {
  local f pid
  for f in "$PIDDIR"/*; do
    [[ -e "$f" ]] || continue
    pid="$(basename "$f")"
    if [[ "$pid" =~ ^[0-9]+$ ]] && [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" =~ ^(redis|valkey)-server ]]; then
      echo "test.sh: stopping leftover test server (pid $pid)" >&2
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
      done
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$RUN_TMP"
}
trap stop_leftover_servers EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [[ -z "${REDIS_SERVER:-}" ]] && ! command -v redis-server >/dev/null 2>&1; then
  # Debian installs it in /usr/bin, which is on PATH; this covers a PATH that lacks it.
  [[ -x /usr/bin/redis-server ]] && export REDIS_SERVER=/usr/bin/redis-server
fi

step "Running the tests"
status=0
rm -f "$BUILD_DIR/Testing/Temporary/LastTest.log"  # scanned for sanitizer reports below
(cd "$BUILD_DIR" && env "${RUN_ENV[@]}" timeout --kill-after=30 "${TEST_TIMEOUT:-2400}" \
  ctest --output-on-failure --no-tests=error -j "${CTEST_JOBS:-2}" "${CTEST_ARGS[@]}") || status=$?
if [[ $status -eq 124 ]]; then
  echo "test.sh: the tests did not finish within ${TEST_TIMEOUT:-2400} s" >&2
fi

# A sanitizer report fails its test through the exit status (the options above; the
# sanitizer_canary_* tests check that they do). This scan of every test's output also catches a
# report whose status was lost (a forked child, options overridden from the environment). The
# canaries' own deliberate reports are skipped.
if [[ -n "$SANITIZE" ]]; then
  log="$BUILD_DIR/Testing/Temporary/LastTest.log"
  if [[ -f "$log" ]]; then
    reports="$(awk '/^[0-9]+\/[0-9]+ Testing: / { name = $3 }
      name !~ /^sanitizer_canary_/ && /(ERROR|WARNING): [A-Za-z]+Sanitizer|SUMMARY: [A-Za-z]+Sanitizer|:[0-9]+:[0-9]+: runtime error: / {
        print name ": " $0 }' "$log")"
    if [[ -n "$reports" ]]; then
      echo "test.sh: sanitizer reports in the test output ($log):" >&2
      printf '%s\n' "$reports" >&2
      status=1
    fi
  fi
fi
# shellcheck source=SCRIPTDIR/lib/failures.sh
source "$ROOT/scripts/lib/failures.sh"
# What failed, again at the end of this pass's output, and for .ci/run's closing summary.
report_failures() {
  local summary
  summary="$(failure_summary "$1" "$2")"
  [[ -n "$summary" ]] || return 0
  printf '%s\n' "$summary" >&2
  [[ -z "${REDLIMIT_FAILURES_FILE:-}" ]] || printf '%s\n' "$summary" >>"$REDLIMIT_FAILURES_FILE"
}
[[ $status -eq 0 ]] || report_failures "$BUILD_DIR/Testing/Temporary/LastTest.log" "$BUILD_DIR${SANITIZE:+ ($SANITIZE)}"

# ---- 4. Consumer tests ---------------------------------------------------------------------------
# The package used as users use it: installed to a temporary prefix and found with find_package
# (redlimit::redlimit and redlimit::header_only), vendored with add_subdirectory, and through
# pkg-config; each builds and runs a small program. Plain pass only.
if [[ -z "$SANITIZE" ]]; then
  step "Consumer tests (tests/consumer/run.sh)"
  # With --hiredis1 the installed programs load hiredis 1.2 from where it was unpacked, as a user
  # of a hiredis outside the loader's path does (PKG_CONFIG_PATH already leads there).
  consumer_env=("JOBS=${JOBS:-2}")
  [[ $HIREDIS1 -eq 0 ]] || consumer_env+=("LD_LIBRARY_PATH=$HIREDIS1_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  env "${consumer_env[@]}" bash "$ROOT/tests/consumer/run.sh" "$BUILD_DIR" || status=1
fi

# ---- 5. Fuzz (bounded) ---------------------------------------------------------------------------
# The parsers and the reply decoder under libFuzzer with ASan+UBSan, FUZZ_SECONDS per target, built
# with clang in a directory of their own (fuzz.sh reconfigures its BUILD_DIR with clang++).
if [[ $FUZZ -eq 1 && -z "$SANITIZE" ]]; then
  step "Fuzzing (${FUZZ_SECONDS:-15} s per target)"
  fuzz_args=()
  [[ $INSTALL -eq 0 ]] && fuzz_args+=(--no-install)
  BUILD_DIR="${FUZZ_BUILD_DIR:-${BUILD_DIR%/}-fuzz}" bash "$ROOT/scripts/fuzz.sh" "${fuzz_args[@]}" \
    "${FUZZ_SECONDS:-15}" || status=1
fi
exit "$status"
