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

# A port the kernel considers free now; redis-server may still lose it to someone else: then retry.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

dir=$(mktemp -d)
pid=
cleanup() {
  if [[ -n "$pid" ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT

for attempt in 1 2 3 4 5; do
  port=$(free_port)
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
    --dir "$dir" --logfile "$dir/redis.log" </dev/null >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 50); do
    if redis-cli -p "$port" ping >/dev/null 2>&1; then break; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  # Ours only if our process is alive and answers: the port may have gone to another server.
  if kill -0 "$pid" 2>/dev/null && [[ "$(redis-cli -p "$port" info server | tr -d '\r' | sed -n 's/^process_id://p')" == "$pid" ]]; then
    break
  fi
  kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=
done
[[ -n "$pid" ]] || { echo "record_golden.sh: could not start redis-server" >&2; exit 1; }

echo "recording from $(redis-server --version | cut -d' ' -f3) on 127.0.0.1:$port (pid $pid)"
"$build/tests/redlimit_record_golden" "redis://127.0.0.1:$port/0" "$out"
