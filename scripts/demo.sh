#!/usr/bin/env bash
# Builds redlimit's examples and runs each one: one per strategy, each printing its decisions; then
# starts the HTTP service example for a few seconds and shows a 429 with its headers, via curl.
#
#   scripts/demo.sh                      # starts a throwaway redis-server on a free loopback port
#   REDIS_URL=redis://host:6379/0 scripts/demo.sh   # uses that server instead
#   scripts/demo.sh --memory             # the in-memory backend: no Redis at all
#
# On a fresh Debian 12 machine it first installs what is missing (with sudo when not root). The
# build goes to build-demo/, apart from the tests' build/. The examples write only keys under
# "redlimit-example:", each with a TTL.
set -euo pipefail

usage() {
  sed -n '2,10s/^# \{0,1\}//p' "$0"
}

for arg in "$@"; do
  case "$arg" in
    --memory)
      # The in-memory backend: the examples and the service run with no Redis at all.
      export REDIS_URL=memory
      ;;
    -h | --help)
      usage
      exit 0
      ;;
    *)
      echo "demo.sh: unknown argument: $arg" >&2
      usage >&2
      exit 2
      ;;
  esac
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build-demo"
PACKAGES=(build-essential cmake ninja-build pkg-config libhiredis-dev libfmt-dev libevent-dev libuv1-dev redis-server redis-tools libcpp-httplib-dev curl)

step() { printf '\n==> %s\n' "$*"; }

install_missing() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  step "Installing ${missing[*]}"
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "demo.sh: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
  fi
  "${sudo[@]}" apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
}

# A loopback port nobody listens on: ask the kernel for one, or else try from 6390 up.
free_port() {
  if command -v python3 >/dev/null; then
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
    return
  fi
  local p
  for p in $(seq 6390 6490); do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return
    fi
  done
  echo "demo.sh: no free port in 6390-6490" >&2
  exit 1
}

REDIS_PID=""
SERVICE_PID=""
TMP=""
cleanup() {
  if [[ -n "$SERVICE_PID" ]] && kill -0 "$SERVICE_PID" 2>/dev/null; then
    kill "$SERVICE_PID" 2>/dev/null || true
    wait "$SERVICE_PID" 2>/dev/null || true
  fi
  if [[ -n "$REDIS_PID" ]] && kill -0 "$REDIS_PID" 2>/dev/null; then
    kill "$REDIS_PID" 2>/dev/null || true
    wait "$REDIS_PID" 2>/dev/null || true
  fi
  [[ -n "$TMP" ]] && rm -rf "$TMP"
  return 0
}
trap cleanup EXIT

start_redis() {
  TMP="$(mktemp -d -t redlimit-demo.XXXXXX)"
  local port
  port="$(free_port)"
  step "Starting a throwaway redis-server on 127.0.0.1:$port"
  (cd "$TMP" && exec redis-server --save "" --appendonly no --port "$port" --bind 127.0.0.1 \
    --daemonize no --dir "$TMP" --logfile "$TMP/redis.log") &
  REDIS_PID=$!
  local _
  for _ in $(seq 1 100); do
    if redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; then
      export REDIS_URL="redis://127.0.0.1:$port/0"
      return 0
    fi
    if ! kill -0 "$REDIS_PID" 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "demo.sh: redis-server did not answer on port $port; its log:" >&2
  cat "$TMP/redis.log" >&2 || true
  exit 1
}

install_missing

step "Building the examples in $BUILD"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DREDLIMIT_BUILD_TESTS=OFF -DREDLIMIT_BUILD_EXAMPLES=ON >/dev/null
cmake --build "$BUILD" -j "$(nproc)"

if [[ -z "${REDIS_URL:-}" ]]; then
  start_redis
else
  step "Using REDIS_URL=$REDIS_URL"
fi

for example in fixed_window sliding_log sliding_window token_bucket leaky_bucket policy; do
  step "example_$example"
  "$BUILD/examples/example_$example"
done

# The HTTP service: 15 requests with one API key at once (its limit is 10/s); the last is answered 429.
demo_service() {
  local port
  port="$(free_port)"
  step "example_http_service on 127.0.0.1:$port: 15 requests with one API key, the last one shown"
  PORT="$port" "$BUILD/examples/example_http_service" >/dev/null &
  SERVICE_PID=$!
  local _
  for _ in $(seq 1 100); do
    curl -s -o /dev/null "http://127.0.0.1:$port/healthz" && break
    sleep 0.1
  done
  local key="demo-$$-$RANDOM"
  for _ in $(seq 1 14); do
    curl -s -o /dev/null -H "X-API-Key: $key" "http://127.0.0.1:$port/api/search"
  done
  curl -s -i -H "X-API-Key: $key" "http://127.0.0.1:$port/api/search" | tr -d '\r'
  echo
  kill "$SERVICE_PID" 2>/dev/null || true
  wait "$SERVICE_PID" 2>/dev/null || true
  SERVICE_PID=""
}
if [[ -x "$BUILD/examples/example_http_service" ]]; then
  demo_service
else
  step "example_http_service was not built (libcpp-httplib-dev missing): no HTTP demo"
fi

step "Done: every example ran."
