# shellcheck shell=bash
# A throwaway redis-server for a script of scripts/: its own scratch directory, a free loopback
# port, no persistence, stopped by its pid when the script exits. Sourced by record_golden.sh and
# instructions.sh.
#
#   source scripts/lib/server.sh       # makes SERVER_DIR, sets an EXIT trap that stops and removes
#   start_server [WRAPPER...]          # redis-server, or WRAPPER... redis-server (valgrind ...)
#   ... use 127.0.0.1:$SERVER_PORT (pid $SERVER_PID) ...
#   stop_server                        # before starting another; the trap does it at exit
#
# start_server returns non-zero with a message when no server of ours answers after five tries.

# A port the kernel considers free now; redis-server may still lose it to someone else: then retry.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

SERVER_DIR=$(mktemp -d)
SERVER_PID=
SERVER_PORT=

stop_server() {
  if [[ -n "$SERVER_PID" ]]; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  SERVER_PID=
}

server_cleanup() {
  stop_server
  rm -rf "$SERVER_DIR"
}
trap server_cleanup EXIT

# shellcheck disable=SC2120  # its arguments are optional: a wrapper command, or none
start_server() {
  for _ in 1 2 3 4 5; do
    SERVER_PORT=$(free_port)
    "$@" redis-server --port "$SERVER_PORT" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
      --dir "$SERVER_DIR" --logfile "$SERVER_DIR/redis.log" </dev/null >"$SERVER_DIR/stdout.log" 2>&1 &
    SERVER_PID=$!
    # Up to 15 s: under valgrind the server takes a few seconds to answer.
    for _ in $(seq 150); do
      if redis-cli -p "$SERVER_PORT" ping >/dev/null 2>&1; then break; fi
      kill -0 "$SERVER_PID" 2>/dev/null || break
      sleep 0.1
    done
    # Ours only if our process is alive and answers: the port may have gone to another server.
    if kill -0 "$SERVER_PID" 2>/dev/null &&
      [[ "$(redis-cli -p "$SERVER_PORT" info server | tr -d '\r' | sed -n 's/^process_id://p')" == "$SERVER_PID" ]]; then
      return 0
    fi
    stop_server
  done
  echo "$(basename "$0"): could not start redis-server" >&2
  return 1
}
