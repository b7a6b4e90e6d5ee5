#!/usr/bin/env bash
# Records tests/golden/*.trace from a real Redis: builds the recorder, starts a throwaway
# redis-server on a free loopback port (no persistence, its own temp dir), runs the recorder
# against it, and stops the server by its pid. Run it after changing anything in lua/, then commit
# the traces with the change (tests/unit/golden_test.cpp fails until then).
#
#   scripts/record_golden.sh [BUILD_DIR]     # default: build
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
out=$root/tests/golden

if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREDLIMIT_BUILD_TESTS=ON
fi
cmake --build "$build" --target redlimit_record_golden -j2

# shellcheck source=SCRIPTDIR/lib/server.sh
source "$root/scripts/lib/server.sh"
start_server || exit 1

echo "recording from $(redis-server --version | cut -d' ' -f3) on 127.0.0.1:$SERVER_PORT (pid $SERVER_PID)"
"$build/tests/redlimit_record_golden" "redis://127.0.0.1:$SERVER_PORT/0" "$out"
