#!/usr/bin/env bash
# A throwaway Redis Cluster on loopback: 3 masters, each with a replica (CLUSTER_REPLICAS), on free
# ports, in a temp dir, with a short cluster-node-timeout so failover takes about a second. Used by
# the cluster tests and CI.
#
#   scripts/cluster.sh start [STATE_FILE]   # prints the seed URL; writes ports, pids, dir to STATE_FILE
#   scripts/cluster.sh stop  [STATE_FILE]
#
# STATE_FILE defaults to $TMPDIR/redlimit-cluster.state. Env: CLUSTER_NODE_TIMEOUT (ms, default 1000);
# CLUSTER_REPLICAS, replicas per master (1, the default; 0 starts 3 masters alone, to weigh what
# streaming every write to a replica costs a master: docs/performance.md, "Redis Cluster");
# REDIS_SERVER, the server binary (default: redis-server from PATH; a valkey-server runs the same
# cluster: the ctest cluster_valkey).
set -euo pipefail

state=${2:-${TMPDIR:-/tmp}/redlimit-cluster.state}
node_timeout=${CLUSTER_NODE_TIMEOUT:-1000}
replicas=${CLUSTER_REPLICAS:-1}
[[ "$replicas" =~ ^[0-9]$ ]] || { echo "cluster.sh: CLUSTER_REPLICAS must be a digit, not '$replicas'" >&2; exit 2; }
server=${REDIS_SERVER:-redis-server}
# DEBUG (the fault tests') is allowed by a server older than 7.0 and asked for from 7.0 on, whose
# directive for it an older server would refuse to start with.
debug_args=()
if [[ $("$server" --version | sed -n 's/.* v=\([0-9]*\).*/\1/p') -ge 7 ]]; then
  debug_args=(--enable-debug-command local)
fi

# A free port whose cluster bus port (port + 10000) is free too, both below the kernel's ephemeral
# range where it leaves room: a client reconnecting to a killed node's port inside that range can
# draw the port as its own and reach itself (src/hiredis/self_connect.hpp; the library refuses such
# a connection, and a port outside the range never shows it).
free_port() {
  python3 - "$@" <<'PY'
import random, socket, sys
taken = set(sys.argv[1:])
try:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    low = 32768
top = low - 10000 if low - 10000 > 12000 else 45000  # below the range, or as before
for _ in range(1000):
    p = random.randrange(10000, top)
    if str(p) in taken or str(p + 10000) in taken:
        continue
    socks = []
    try:
        for q in (p, p + 10000):
            s = socket.socket()
            s.bind(("127.0.0.1", q))
            socks.append(s)
        print(p)
        break
    except OSError:
        pass
    finally:
        for s in socks:
            s.close()
else:
    sys.exit("no free port pair")
PY
}

start() {
  if [[ -f "$state" ]]; then
    echo "cluster.sh: $state exists; run 'scripts/cluster.sh stop $state' first" >&2
    exit 1
  fi
  local dir ports=() pids=()
  dir=$(mktemp -d "${TMPDIR:-/tmp}/redlimit-cluster.XXXXXX")
  # The state is written before the first node starts and after each one, so that 'stop' finds
  # every node started so far even if this script is interrupted.
  write_state() {
    {
      echo "dir=$dir"
      echo "ports=\"${ports[*]}\""
      echo "pids=\"${pids[*]}\""
    } >"$state"
  }
  write_state
  for _ in $(seq 1 $((3 * (1 + replicas)))); do
    local port
    port=$(free_port "${ports[@]}")
    mkdir -p "$dir/$port"
    "$server" --port "$port" --bind 127.0.0.1 --cluster-enabled yes \
      --cluster-config-file "$dir/$port/nodes.conf" --cluster-node-timeout "$node_timeout" \
      --dir "$dir/$port" --save "" --appendonly no --daemonize no \
      "${debug_args[@]}" --logfile "$dir/$port/redis.log" </dev/null >/dev/null 2>&1 &
    pids+=($!)
    ports+=("$port")
    write_state
  done
  for port in "${ports[@]}"; do
    for _ in $(seq 1 100); do
      redis-cli -p "$port" ping >/dev/null 2>&1 && break
      sleep 0.05
    done
  done
  local nodes=()
  for port in "${ports[@]}"; do nodes+=("127.0.0.1:$port"); done
  redis-cli --cluster create "${nodes[@]}" --cluster-replicas "$replicas" --cluster-yes >"$dir/create.log" 2>&1 || {
    cat "$dir/create.log" >&2
    stop
    exit 1
  }
  # Wait until every node agrees the cluster is up and knows each master's replicas (each node's
  # own view: a master can hear of its replica by gossip after another node has).
  for _ in $(seq 1 200); do
    local ok=1
    for port in "${ports[@]}"; do
      redis-cli -p "$port" cluster info 2>/dev/null | grep -q 'cluster_state:ok' || ok=0
      [[ $(redis-cli -p "$port" cluster nodes 2>/dev/null | grep -c slave) -ge $((3 * replicas)) ]] || ok=0
    done
    if [[ $ok == 1 ]]; then
      echo "redis-cluster://127.0.0.1:${ports[0]},127.0.0.1:${ports[1]},127.0.0.1:${ports[2]}"
      return 0
    fi
    sleep 0.1
  done
  echo "cluster.sh: the cluster did not come up" >&2
  stop
  exit 1
}

stop() {
  [[ -f "$state" ]] || return 0
  # shellcheck disable=SC1090
  source "$state"
  for pid in $pids; do kill "$pid" 2>/dev/null || true; done
  for pid in $pids; do
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -9 "$pid" 2>/dev/null || true
  done
  [[ -n "${dir:-}" && -d "$dir" ]] && rm -rf "$dir"
  rm -f "$state"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: scripts/cluster.sh start|stop [STATE_FILE]" >&2; exit 2 ;;
esac
