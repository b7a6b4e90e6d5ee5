#!/usr/bin/env bash
# wrk against examples/http_service's /api/search with the limiter on Redis, on the memory backend,
# and off (LIMITER=off): requests/s, p50 and p99 latency, and Redis CPU per request (issue 16).
# scripts/bench.sh runs it at its end; alone:
#
#   scripts/bench_http.sh [BUILD_DIR]     # default build-bench/; needs example_http_service built
#
# Knobs (environment): HTTP_BENCH_SECONDS (per run, default 10), HTTP_BENCH_CONNECTIONS (default 4: fewer than cpp-httplib's worker threads, which each hold a keep-alive connection),
# HTTP_BENCH_THREADS (default 1). Each request carries one of 100,000 API keys (benchmarks/wrk_keys.lua),
# so the per-key 10/s rarely rejects, and the global limit is raised out of the way: the figures are
# the cost of two decisions per request (the key's policy and the global window), not of 429s.
# redis-server, the service and wrk listen on free loopback ports and are stopped on exit.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build-bench}"
SERVICE="$BUILD/examples/example_http_service"
SECS="${HTTP_BENCH_SECONDS:-10}"
CONNS="${HTTP_BENCH_CONNECTIONS:-4}"
THREADS="${HTTP_BENCH_THREADS:-1}"
[[ -x "$SERVICE" ]] || { echo "bench_http.sh: $SERVICE is not built (libcpp-httplib-dev)" >&2; exit 1; }
command -v wrk >/dev/null || { echo "bench_http.sh: wrk is not installed (apt-get install wrk)" >&2; exit 1; }

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

TMP="$(mktemp -d -t redlimit-bench-http.XXXXXX)"
REDIS_PID=""
SERVICE_PID=""
stop() {  # pid: stop one process this script started, and reap it
  if [[ -n "$1" ]] && kill -0 "$1" 2>/dev/null; then
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
  fi
}
cleanup() {
  stop "$SERVICE_PID"
  stop "$REDIS_PID"
  rm -rf "$TMP"
}
trap cleanup EXIT

REDIS_PORT="$(free_port)"
(cd "$TMP" && exec redis-server --save "" --appendonly no --port "$REDIS_PORT" --bind 127.0.0.1 \
  --daemonize no --dir "$TMP" --logfile "$TMP/redis.log") &
REDIS_PID=$!
for _ in $(seq 1 100); do
  redis-cli -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG && break
  sleep 0.1
done

cpu_ticks() {  # utime + stime of the redis-server process, in clock ticks
  awk '{print $14 + $15}' "/proc/$REDIS_PID/stat"
}

# mode, REDIS_URL, LIMITER: one wrk run against a fresh service; prints one table row.
run() {
  local mode="$1" url="$2" limiter="$3" port
  port="$(free_port)"
  REDIS_URL="$url" LIMITER="$limiter" PORT="$port" GLOBAL_LIMIT="1000000000/1s" "$SERVICE" >/dev/null 2>&1 &
  SERVICE_PID=$!
  for _ in $(seq 1 100); do
    curl -s -o /dev/null "http://127.0.0.1:$port/healthz" && break
    sleep 0.1
  done
  local before after out
  before="$(cpu_ticks)"
  out="$(wrk -t "$THREADS" -c "$CONNS" -d "${SECS}s" --latency -s "$ROOT/benchmarks/wrk_keys.lua" \
    "http://127.0.0.1:$port/api/search")"
  after="$(cpu_ticks)"
  stop "$SERVICE_PID"
  SERVICE_PID=""
  local rps p50 p99 requests
  rps="$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")"
  p50="$(awk '$1 == "50%" {print $2}' <<<"$out")"
  p99="$(awk '$1 == "99%" {print $2}' <<<"$out")"
  requests="$(awk '/requests in/ {print $1}' <<<"$out")"
  local cpu_us
  cpu_us="$(awk -v t="$((after - before))" -v hz="$(getconf CLK_TCK)" -v n="$requests" \
    'BEGIN { printf "%.1f", (n > 0 ? t / hz * 1e6 / n : 0) }')"
  printf '| %s | %s | %s | %s | %s |\n' "$mode" "$rps" "$p50" "$p99" "$cpu_us"
}

echo "wrk -t $THREADS -c $CONNS -d ${SECS}s, /api/search, $(nproc) cores shared by redis-server, the service and wrk"
echo
echo "| limiter | requests/s | p50 | p99 | Redis CPU µs/request |"
echo "|---|---|---|---|---|"
run "off" "memory" "off"
run "memory backend" "memory" "on"
run "Redis" "redis://127.0.0.1:$REDIS_PORT/0" "on"
