#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/) with clang and runs each for a bounded time; exits
# non-zero if any of them finds a crash, a failed invariant, a sanitizer report, a leak or a hang.
#
#   scripts/fuzz.sh              # every target for 20 s
#   scripts/fuzz.sh 60           # every target for 60 s
#   scripts/fuzz.sh --no-install 15
#   FUZZ_TARGETS="fuzz_url fuzz_rate" scripts/fuzz.sh 30
#
# On Debian (12) it installs clang, libclang-rt-14-dev (libFuzzer, the sanitizer runtimes) and the
# build tools when missing, with apt-get (as root, or with sudo). Each target runs over its own work corpus in
# $BUILD_DIR/corpus/<target>, seeded from tests/fuzz/corpus/<target> (the repository's corpus is
# never written to); what a run finds stays there for the next run. Reproducers go to
# $BUILD_DIR/artifacts/<target>/; rerun one with: $BUILD_DIR/tests/fuzz/<target> <file>.
# Env: BUILD_DIR (default build-fuzz), JOBS (build parallelism, default 2), FUZZ_TARGETS,
# CXX_FUZZ (default clang++), FUZZ_ARGS (extra libFuzzer flags).
set -euo pipefail

usage() {
  sed -n '2,17s/^# \{0,1\}//p' "$0"
}

SECONDS_PER_TARGET=20
INSTALL=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-install)
      INSTALL=0
      shift
      ;;
    -h | --help)
      usage
      exit 0
      ;;
    *)
      if [[ "$1" =~ ^[0-9]+$ ]] && [[ "$1" -gt 0 ]]; then
        SECONDS_PER_TARGET="$1"
        shift
      else
        echo "fuzz.sh: expected a number of seconds per target, got '$1'" >&2
        usage >&2
        exit 2
      fi
      ;;
  esac
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-fuzz}"
CXX_FUZZ="${CXX_FUZZ:-clang++}"
ALL_TARGETS=(fuzz_url fuzz_rate fuzz_keys fuzz_reply fuzz_command_slot fuzz_memory_scripts)
read -r -a TARGETS <<<"${FUZZ_TARGETS:-${ALL_TARGETS[*]}}"

step() { printf '\n==> %s\n' "$*"; }

# ---- 1. Packages ---------------------------------------------------------------------------------
PACKAGES=(clang libclang-rt-14-dev cmake ninja-build pkg-config libhiredis-dev libfmt-dev)

# shellcheck source=SCRIPTDIR/lib/install.sh
source "$ROOT/scripts/lib/install.sh"
install_missing fuzz.sh "$INSTALL" "${PACKAGES[@]}"

# ---- 2. Configure and build ----------------------------------------------------------------------
if [[ -f "$BUILD_DIR/CMakeCache.txt" ]]; then
  GENERATOR_ARGS=()
elif command -v ninja >/dev/null 2>&1; then
  GENERATOR_ARGS=(-G Ninja)
else
  GENERATOR_ARGS=()
fi

step "Configuring in $BUILD_DIR (compiler: $CXX_FUZZ)"
cmake -S "$ROOT" -B "$BUILD_DIR" "${GENERATOR_ARGS[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER="$CXX_FUZZ" -DREDLIMIT_BUILD_FUZZERS=ON -DREDLIMIT_BUILD_TESTS=OFF \
  -DREDLIMIT_BUILD_EXAMPLES=OFF -DREDLIMIT_BUILD_BENCHMARKS=OFF -DREDLIMIT_INSTALL=OFF

step "Building ${TARGETS[*]} (-j${JOBS:-2})"
cmake --build "$BUILD_DIR" -j "${JOBS:-2}" --target "${TARGETS[@]}"

# ---- 3. Fuzz -------------------------------------------------------------------------------------
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
read -r -a EXTRA_ARGS <<<"${FUZZ_ARGS:-}"

list_files() { find "$1" -mindepth 1 -maxdepth 1 -printf '%f\n'; }

failed=()
summary=()
for target in "${TARGETS[@]}"; do
  bin="$BUILD_DIR/tests/fuzz/$target"
  seeds="$ROOT/tests/fuzz/corpus/$target"
  work="$BUILD_DIR/corpus/$target"
  artifacts="$BUILD_DIR/artifacts/$target"
  log="$BUILD_DIR/logs/$target.log"
  mkdir -p "$work" "$artifacts" "$(dirname "$log")"
  if [[ -d "$seeds" ]]; then
    cp -n "$seeds"/* "$work"/ 2>/dev/null || true
  fi
  args=(-max_total_time="$SECONDS_PER_TARGET" -timeout=5 -rss_limit_mb=2048 -print_final_stats=1
    -artifact_prefix="$artifacts/")
  dict="$ROOT/tests/fuzz/$target.dict"
  [[ -f "$dict" ]] && args+=(-dict="$dict")
  step "$target for ${SECONDS_PER_TARGET} s (log: $log)"
  before="$(list_files "$artifacts")"
  status=0
  # The outer timeout only guards against a fuzzer that ignores -max_total_time (a hang it cannot
  # interrupt); -timeout=5 already turns a slow input into a reported failure.
  timeout --kill-after=30 "$((SECONDS_PER_TARGET + 120))" \
    "$bin" "${args[@]}" "${EXTRA_ARGS[@]}" "$work" >"$log" 2>&1 || status=$?
  done_line="$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1 || true)"
  rate="$(sed -n 's/^stat::average_exec_per_sec:[[:space:]]*//p' "$log" | tail -n 1)"
  execs="$(sed -n 's/^stat::number_of_executed_units:[[:space:]]*//p' "$log" | tail -n 1)"
  cov="$(sed -n 's/.*DONE[[:space:]]*\(cov: [0-9]*\).*/\1/p' <<<"$done_line")"
  corp="$(sed -n 's/.*\(corp: [0-9]*\/[0-9a-zA-Z]*\).*/\1/p' <<<"$done_line")"
  line="$(printf '%-18s %s  execs: %s  exec/s: %s  %s  %s' "$target" \
    "$([[ $status -eq 0 ]] && echo ok || echo "FAILED (exit $status)")" "${execs:-?}" "${rate:-?}" "${cov:-cov: ?}" \
    "${corp:-corp: ?}")"
  summary+=("$line")
  echo "$line"
  if [[ $status -ne 0 ]]; then
    failed+=("$target")
    echo "---- last lines of $log ----" >&2
    tail -n 60 "$log" >&2
    new="$(comm -13 <(printf '%s\n' "$before" | sort) <(list_files "$artifacts" | sort) || true)"
    if [[ -n "$new" ]]; then
      while IFS= read -r f; do
        [[ -n "$f" ]] || continue
        echo "fuzz.sh: $target: reproducer $artifacts/$f" >&2
        echo "fuzz.sh:   rerun with: $bin $artifacts/$f" >&2
      done <<<"$new"
    else
      echo "fuzz.sh: $target exited with status $status without writing a reproducer; see $log" >&2
    fi
  fi
done

step "Summary (${SECONDS_PER_TARGET} s per target)"
printf '%s\n' "${summary[@]}"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz.sh: failures in: ${failed[*]}" >&2
  exit 1
fi
