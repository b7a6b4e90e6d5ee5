#!/usr/bin/env bash
# Benchmarks redlimit against the Redis ceiling and two peers, in one run on one redis-server of its
# own, then the same throughput rows on a local Redis Cluster (3 masters + 3 replicas, started with
# scripts/cluster.sh), and writes docs/performance.md.
#
#   scripts/bench.sh                 # the full run (about 8-10 minutes on 2 cores)
#   BENCH_QUICK=1 scripts/bench.sh   # a smoke run (about 1.5 minutes), same tables, smaller numbers
#
# Knobs (environment): BENCH_QUICK=1; BENCH_REPS (repetitions of every throughput measurement, the
# best is kept; default 3, quick 1); BENCH_SECONDS (wall-clock per measurement; default 0.6);
# BENCH_SIZES (growth sizes; default 1,1000,100000,1000000); BENCH_GROWTH_BUDGET (seconds for the
# growth suite; default 240); BENCH_FLOOD_LIMIT (the flooded sliding log's limit; default 1000);
# BENCH_PIN=1 (redis-server on CPU 0, every client on CPU 1); BENCH_OUT (default docs/performance.md);
# BENCH_SKIP_INSTALL=1 (install nothing); BENCH_WAIT_QUIET=S (on a shared machine: first wait up to S
# seconds for the 1-minute load average to fall below BENCH_QUIET_LOAD, default 1);
# BENCH_KEEP_RESULTS=FILE (keep the raw JSON lines); BENCH_CLUSTER=0 (no cluster rows); BENCH_HTTP=0
# (no wrk run of the HTTP service, scripts/bench_http.sh, appended to the report).
#
# On a fresh Debian 12 machine it first installs what is missing (apt; npm into
# benchmarks/peers/node). Builds go to build-bench/. The server and the cluster listen on free
# loopback ports, keep nothing on disk, and are stopped on exit whatever happens.
set -euo pipefail

usage() { sed -n '2,22s/^# \{0,1\}//p' "$0"; }
for arg in "$@"; do
  case "$arg" in
    -h | --help) usage; exit 0 ;;
    *) echo "bench.sh: unknown argument: $arg" >&2; usage >&2; exit 2 ;;
  esac
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build-bench"
PEERS="$ROOT/benchmarks/peers"
OUT="${BENCH_OUT:-$ROOT/docs/performance.md}"
STARTED_AT="$(date +%s)"

QUICK="${BENCH_QUICK:-0}"
if [[ "$QUICK" == 1 ]]; then
  REPS="${BENCH_REPS:-1}"
  SECONDS_PER="${BENCH_SECONDS:-0.3}"
  SIZES="${BENCH_SIZES:-1,1000,10000}"
  GROWTH_BUDGET="${BENCH_GROWTH_BUDGET:-20}"
  FLOOD_LIMIT="${BENCH_FLOOD_LIMIT:-100}"
  RB_SEQ_N=5000
  RB_PIPE_N=100000
else
  REPS="${BENCH_REPS:-3}"
  SECONDS_PER="${BENCH_SECONDS:-0.6}"
  SIZES="${BENCH_SIZES:-1,1000,100000,1000000}"
  GROWTH_BUDGET="${BENCH_GROWTH_BUDGET:-240}"
  FLOOD_LIMIT="${BENCH_FLOOD_LIMIT:-1000}"
  RB_SEQ_N=20000
  RB_PIPE_N=300000
fi
PIN="${BENCH_PIN:-0}"
CLUSTER="${BENCH_CLUSTER:-1}"
SERVER_CPU=()
CLIENT_CPU=()
if [[ "$PIN" == 1 ]]; then
  SERVER_CPU=(taskset -c 0)
  CLIENT_CPU=(taskset -c 1)
fi

step() { printf '\n==> %s\n' "$*" >&2; }
# A driver that fails leaves its rows out (the report says "missing"); the run goes on.
FAILURES=()
failed() {
  echo "bench.sh: $1 failed; its rows will be missing" >&2
  FAILURES+=("$1")
}

# --- What the run needs ---------------------------------------------------------------------------
APT_PACKAGES=(build-essential cmake ninja-build pkg-config libhiredis-dev libfmt-dev libbenchmark-dev libevent-dev
  redis-server redis-tools python3-limits python3-redis wrk libcpp-httplib-dev curl)

install_missing() {
  local missing=() p
  for p in "${APT_PACKAGES[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  # Node may come from elsewhere than Debian (its npm then comes with it): ask for the commands.
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  if [[ ${#missing[@]} -gt 0 ]]; then
    step "Installing ${missing[*]}"
    local sudo=()
    if [[ $(id -u) -ne 0 ]]; then
      command -v sudo >/dev/null || { echo "bench.sh: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
      sudo=(sudo)
    fi
    "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=300 update
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y \
      --no-install-recommends "${missing[@]}"
  fi
  if [[ ! -d "$PEERS/node/node_modules/rate-limiter-flexible" || ! -d "$PEERS/node/node_modules/ioredis" ]]; then
    step "Installing rate-limiter-flexible and ioredis into benchmarks/peers/node"
    (cd "$PEERS/node" && npm ci --no-audit --no-fund --loglevel=error)
  fi
}

if [[ "${BENCH_SKIP_INSTALL:-0}" != 1 ]]; then install_missing; fi

# --- Build ----------------------------------------------------------------------------------------
step "Building the benchmarks in $BUILD (Release)"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DREDLIMIT_BUILD_BENCHMARKS=ON \
  -DREDLIMIT_BUILD_TESTS=OFF -DREDLIMIT_BUILD_EXAMPLES=ON -DREDLIMIT_BUILD_CLI=OFF -DREDLIMIT_INSTALL=OFF -Wno-dev >/dev/null
cmake --build "$BUILD" -j "$(nproc)" --target redlimit_bench
HAVE_MICRO=0
if cmake --build "$BUILD" -j "$(nproc)" --target redlimit_micro >/dev/null 2>&1; then HAVE_MICRO=1; fi

# --- Our own redis-server -------------------------------------------------------------------------
TMP="$(mktemp -d -t redlimit-bench.XXXXXX)"
REDIS_PID=""
CLUSTER_STATE="$TMP/cluster.state"  # written by scripts/cluster.sh start, read by its stop
cleanup() {
  if [[ -f "$CLUSTER_STATE" ]]; then
    bash "$ROOT/scripts/cluster.sh" stop "$CLUSTER_STATE" >/dev/null 2>&1 || true
  fi
  if [[ -n "$REDIS_PID" ]] && kill -0 "$REDIS_PID" 2>/dev/null; then
    kill "$REDIS_PID" 2>/dev/null || true
    wait "$REDIS_PID" 2>/dev/null || true
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
step "Starting redis-server on 127.0.0.1:$PORT (no persistence)"
(cd "$TMP" && exec "${SERVER_CPU[@]}" redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no \
  --daemonize no --dir "$TMP" --logfile "$TMP/redis.log") &
REDIS_PID=$!
for _ in $(seq 1 100); do
  redis-cli -p "$PORT" ping 2>/dev/null | grep -q PONG && break
  kill -0 "$REDIS_PID" 2>/dev/null || { cat "$TMP/redis.log" >&2; exit 1; }
  sleep 0.1
done
redis-cli -p "$PORT" ping | grep -q PONG || { echo "bench.sh: redis-server did not answer" >&2; exit 1; }
rcli() { redis-cli -p "$PORT" "$@"; }

# --- A local Redis Cluster: 3 masters + 3 replicas ------------------------------------------------
# Up for the throughput repetitions (idle while the one server is measured), so that each
# repetition measures the cluster right after the one server; stopped before the other suites. Its nodes are pinned with redis-server under BENCH_PIN=1.
CLUSTER_URL=""
CLUSTER_STATUS="skipped"
if [[ "$CLUSTER" == 1 ]]; then
  step "Starting a Redis Cluster (3 masters + 3 replicas) with scripts/cluster.sh"
  if CLUSTER_URL="$(TMPDIR="$TMP" timeout 180 "${SERVER_CPU[@]}" bash "$ROOT/scripts/cluster.sh" start "$CLUSTER_STATE")" &&
    [[ "$CLUSTER_URL" == redis-cluster://* ]]; then
    CLUSTER_STATUS="ran"
    echo "  $CLUSTER_URL" >&2
  else
    CLUSTER_URL=""
    CLUSTER_STATUS="failed"
    failed "scripts/cluster.sh start"
  fi
fi

if [[ -n "${BENCH_WAIT_QUIET:-}" ]]; then
  quiet_load="${BENCH_QUIET_LOAD:-1.0}"
  step "Waiting up to ${BENCH_WAIT_QUIET}s for the machine to be quiet (load average < $quiet_load)"
  quiet_deadline=$(($(date +%s) + BENCH_WAIT_QUIET))
  while awk -v q="$quiet_load" '{ exit !($1 >= q) }' /proc/loadavg && [[ $(date +%s) -lt $quiet_deadline ]]; do
    sleep 5
  done
fi

RESULTS="$TMP/results.jsonl"
: >"$RESULTS"
LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"

main_thread_cpu() {  # CPU seconds of Redis's main thread, user + system
  rcli INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys)_main_thread:/ { t += $2 } END { printf "%.6f", t }'
}

# redis-benchmark: EVALSHA of a one-line INCR script, sequential (-c 1) and pipelined (-P 32).
SHA="$(rcli SCRIPT LOAD "return redis.call('INCR', KEYS[1])")"
redis_benchmark() {  # mode, rep, extra args...
  local mode="$1" rep="$2"
  shift 2
  rcli CONFIG RESETSTAT >/dev/null
  local rps usec calls cpu0 cpu1
  cpu0="$(main_thread_cpu)"
  rps="$(timeout 120 "${CLIENT_CPU[@]}" redis-benchmark -p "$PORT" "$@" --csv EVALSHA "$SHA" 1 rb:key |
    tail -n 1 | cut -d, -f2 | tr -d '"')"
  cpu1="$(main_thread_cpu)"
  usec="$(rcli INFO commandstats | tr -d '\r' | sed -n 's/^cmdstat_evalsha:.*usec_per_call=\([0-9.]*\).*/\1/p')"
  calls="$(rcli INFO commandstats | tr -d '\r' | sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\).*/\1/p')"
  printf '{"suite": "redis-benchmark", "mode": "%s", "rep": %s, "rate": %s, "usec_per_decision": %s, "server_cpu_us_per_decision": %s}\n' \
    "$mode" "$rep" "${rps:-0}" "${usec:-0}" "$(awk -v a="$cpu0" -v b="$cpu1" -v n="${calls:-0}" \
    'BEGIN { printf "%.4f", (n > 0 ? (b - a) * 1e6 / n : 0) }')" >>"$RESULTS"
  printf '  [redis-benchmark] %s rep %s: %s/s\n' "$mode" "$rep" "$rps" >&2
}

BENCH=("${CLIENT_CPU[@]}" "$BUILD/benchmarks/redlimit_bench" --port "$PORT" --seconds "$SECONDS_PER")
CLUSTER_BENCH=(timeout 600 "${CLIENT_CPU[@]}" "$BUILD/benchmarks/redlimit_bench" --url "$CLUSTER_URL" --suite cluster
  --seconds "$SECONDS_PER")

# Throughput rows are repeated BENCH_REPS times, interleaved (the ceiling, redlimit, the peers,
# then again), so that a burst of load from elsewhere on the machine spoils one repetition of each,
# not every repetition of one; the report keeps the best of each.
for rep in $(seq 1 "$REPS"); do
  step "Throughput, repetition $rep of $REPS"
  redis_benchmark c1 "$rep" -c 1 -n "$RB_SEQ_N"
  redis_benchmark P32 "$rep" -c 1 -P 32 -n "$RB_PIPE_N"
  "${BENCH[@]}" --suite raw | sed "s/^{/{\"rep\": $rep, /" >>"$RESULTS" || failed "redlimit_bench --suite raw"
  "${BENCH[@]}" --suite throughput | sed "s/^{/{\"rep\": $rep, /" >>"$RESULTS" ||
    failed "redlimit_bench --suite throughput"
  # The same strategies and modes on the cluster, right after the one server (the cluster flushes
  # its own masters when done).
  if [[ -n "$CLUSTER_URL" ]]; then
    "${CLUSTER_BENCH[@]}" | sed "s/^{/{\"rep\": $rep, /" >>"$RESULTS" || failed "redlimit_bench --suite cluster (rep $rep)"
  fi
  timeout 180 "${CLIENT_CPU[@]}" node "$PEERS/rlf_bench.js" --port "$PORT" --seconds "$SECONDS_PER" --reps 1 \
    --phase throughput | sed "s/\"rep\":0/\"rep\":$rep/" >>"$RESULTS" || failed "rlf_bench.js"
  timeout 180 "${CLIENT_CPU[@]}" /usr/bin/python3 "$PEERS/limits_bench.py" --port "$PORT" --seconds "$SECONDS_PER" \
    --reps 1 --phase throughput | sed "s/\"rep\": 0/\"rep\": $rep/" >>"$RESULTS" || failed "limits_bench.py"
  rcli FLUSHALL >/dev/null
done
# The fixed window's rate through failovers (CLUSTER FAILOVER to a replica and back; then a master
# stopped until its replica is promoted): last on the cluster, as it changes which nodes are masters.
if [[ -n "$CLUSTER_URL" ]]; then
  step "The cluster through failovers (CLUSTER FAILOVER; a master stopped)"
  timeout 120 "${CLIENT_CPU[@]}" "$BUILD/benchmarks/redlimit_bench" --url "$CLUSTER_URL" --suite failover >>"$RESULTS" ||
    failed "redlimit_bench --suite failover"
fi
if [[ -f "$CLUSTER_STATE" ]]; then
  step "Stopping the cluster (the suites below run on the one server)"
  bash "$ROOT/scripts/cluster.sh" stop "$CLUSTER_STATE" >/dev/null 2>&1 || true
fi

step "Memory per subject"
"${BENCH[@]}" --suite memory >>"$RESULTS" || failed "redlimit_bench --suite memory"
timeout 180 "${CLIENT_CPU[@]}" node "$PEERS/rlf_bench.js" --port "$PORT" --phase memory >>"$RESULTS" ||
  failed "rlf_bench.js --phase memory"
timeout 180 "${CLIENT_CPU[@]}" /usr/bin/python3 "$PEERS/limits_bench.py" --port "$PORT" --phase memory >>"$RESULTS" ||
  failed "limits_bench.py --phase memory"

step "A sliding log flooded at 100x its limit ($FLOOD_LIMIT)"
"${BENCH[@]}" --suite flood --flood-limit "$FLOOD_LIMIT" >>"$RESULTS" || failed "redlimit_bench --suite flood"
timeout 300 "${CLIENT_CPU[@]}" /usr/bin/python3 "$PEERS/limits_bench.py" --port "$PORT" --phase flood \
  --flood-limit "$FLOOD_LIMIT" >>"$RESULTS" || failed "limits_bench.py --phase flood"
rcli FLUSHALL >/dev/null

step "The largest quotas (2^40 per ten years; a million a day): Redis CPU per call by cost"
"${BENCH[@]}" --suite largest >>"$RESULTS" || failed "redlimit_bench --suite largest"
rcli FLUSHALL >/dev/null

step "Buckets: a sliding window's Redis CPU per decision by window / precision (1 to 10,000)"
"${BENCH[@]}" --suite buckets >>"$RESULTS" || failed "redlimit_bench --suite buckets"
rcli FLUSHALL >/dev/null

step "The Lua heap: script time per decision on a fresh library and after 16,000 bucket names"
"${BENCH[@]}" --suite heap >>"$RESULTS" || failed "redlimit_bench --suite heap"
rcli FLUSHALL >/dev/null

step "Leases: one hot subject, two threads, per request against redlimit::Leases"
"${BENCH[@]}" --suite lease >>"$RESULTS" || failed "redlimit_bench --suite lease"
rcli FLUSHALL >/dev/null

step "Redis Functions against EVALSHA: script time per decision, one and 128 a call (3 repetitions)"
for rep in 1 2 3; do
  "${BENCH[@]}" --suite functions | sed "s/^{/{\"rep\": $rep, /" >>"$RESULTS" || failed "redlimit_bench --suite functions"
done
rcli FLUSHALL >/dev/null

step "Growth: $SIZES subjects (budget ${GROWTH_BUDGET}s)"
"${BENCH[@]}" --suite growth --sizes "$SIZES" --growth-budget "$GROWTH_BUDGET" >>"$RESULTS" ||
  failed "redlimit_bench --suite growth"

MICRO_JSON="$TMP/micro.json"
if [[ "$HAVE_MICRO" == 1 ]]; then
  step "Client-side CPU per decision (no I/O)"
  "${CLIENT_CPU[@]}" "$BUILD/benchmarks/redlimit_micro" --benchmark_min_time=0.2 --benchmark_format=json \
    >"$MICRO_JSON" 2>/dev/null || : >"$MICRO_JSON"
  # Into the results too, one line per benchmark, so that BENCH_KEEP_RESULTS keeps everything.
  python3 -c 'import json, sys
for b in json.load(open(sys.argv[1])).get("benchmarks", []):
    print(json.dumps({"suite": "micro", "name": b["name"], "cpu_time": b["cpu_time"], "time_unit": b.get("time_unit", "ns"),
                      "allocs": b.get("allocs")}))' \
    "$MICRO_JSON" >>"$RESULTS" 2>/dev/null || true
else
  : >"$MICRO_JSON"
fi
LOAD_AFTER="$(cut -d' ' -f1-3 /proc/loadavg)"

COMMAND="scripts/bench.sh"
for v in BENCH_QUICK BENCH_REPS BENCH_SECONDS BENCH_SIZES BENCH_GROWTH_BUDGET BENCH_FLOOD_LIMIT BENCH_PIN \
  BENCH_WAIT_QUIET BENCH_QUIET_LOAD BENCH_CLUSTER; do
  if [[ -n "${!v:-}" ]]; then COMMAND="$v=${!v} $COMMAND"; fi
done

step "Writing $OUT"
mkdir -p "$(dirname "$OUT")"
python3 "$ROOT/benchmarks/report.py" --results "$RESULTS" --micro "$MICRO_JSON" --out "$OUT" \
  --command "$COMMAND" --port "$PORT" --load-before "$LOAD_BEFORE" --load-after "$LOAD_AFTER" \
  --elapsed "$(($(date +%s) - STARTED_AT))" --reps "$REPS" --seconds "$SECONDS_PER" --pin "$PIN" \
  --cluster "$CLUSTER_STATUS"
if [[ -n "${BENCH_KEEP_RESULTS:-}" ]]; then cp "$RESULTS" "$BENCH_KEEP_RESULTS"; fi

# --- The HTTP service under wrk (scripts/bench_http.sh; BENCH_HTTP=0 skips it) ---------------------
if [[ "${BENCH_HTTP:-1}" == 1 ]]; then
  step "The HTTP service under wrk: limiter on Redis, on memory, off"
  if cmake --build "$BUILD" -j "$(nproc)" --target example_http_service >/dev/null 2>&1 &&
    HTTP_TABLE="$("$ROOT/scripts/bench_http.sh" "$BUILD")"; then
    printf '\n## The HTTP service under wrk\n\n`scripts/bench_http.sh` (examples/http_service, /api/search):\n%s\n' \
      "$HTTP_TABLE" >>"$OUT"
  else
    FAILURES+=("bench_http.sh")
  fi
fi
step "Done in $(($(date +%s) - STARTED_AT)) s: $OUT"
if [[ ${#FAILURES[@]} -gt 0 ]]; then
  echo "bench.sh: these drivers failed: ${FAILURES[*]}" >&2
  exit 1
fi
