#!/usr/bin/env bash
# Redis's instructions per decision, counted by callgrind: a deterministic figure for comparing two
# versions of the Lua scripts, where CPU time on this (shared, 2-core) machine moves by 30% from run
# to run. Starts its own redis-server under valgrind on a free loopback port, runs redlimit_bench
# against it (one uncounted second to load the scripts and create the keys, then SECONDS counted),
# and prints, per strategy, the instructions Redis spent inside FCALL (the scripts, their redis.call
# commands, the argument tables and the reply) divided by the decisions made. The socket work
# around each command is left out: it does not depend on the scripts.
#
#   scripts/instructions.sh [BENCH_BINARY] [STRATEGIES] [MODE] [SECONDS]
#     defaults: build-bench/benchmarks/redlimit_bench, every strategy, batch128, 3
#
# The strategy `sliding_log_compact` (one of the bench's throughput suite) is the sliding log
# writing compact entries (Options::sliding_log_members; docs/algorithms.md, "Where its Redis time goes"):
#   scripts/instructions.sh build-bench/benchmarks/redlimit_bench sliding_log,sliding_log_compact batch128
# The strategy `peer` is the reference of issue 13's first targets: a Function doing what
# rate-limiter-flexible's fixed-window script does per call (SET NX with the window's TTL, INCRBY,
# PTTL; two integers back), FCALLed by redis-benchmark, one request at a time, over 200 keys. Its
# figure against `fixed_window seq` is target 1's ratio in instructions, which repeat from run to
# run where the CPU times the bench compares move by a third:
#   scripts/instructions.sh build-bench/benchmarks/redlimit_bench peer,fixed_window,token_bucket seq
# The strategy `floor` is what a single decision of a packed string state (the buckets', and the
# fixed window's until 0.3) costs Redis before any of its Lua: a Function that makes the decision's
# two commands (GET, then SETRANGE in place, or PSETEX for a new key) with the same arguments (a
# key, a time, a head) and returns the same reply (one integer), deciding nothing. A strategy's `seq`
# minus `floor` is its script's own work (the arithmetic, the state's packing, the parsing of the
# time); `peer` minus `floor`, the peer's third command and its reply.
# The strategy `incr` is the fixed window's steady path (lua/fixed_window.lua: a count Redis keeps
# itself, one HINCRBY of a hash field per window) reduced to its least: an integer under a key per
# window (INCRBY), the TTL and a look for a block paid by a window's first request only, a request
# over the limit undone with DECRBY. Same arguments and reply as `floor`.
# The strategy `packed` is `floor` with a bucket's state (helpers.lua, BUCKET: 28 bytes, five
# integers) unpacked from what GET read and packed again for the write: what the buckets' state
# costs to read and write before their decision's arithmetic. `packed` minus `floor` is the struct
# library's work and the new string's; a bucket's `seq` minus `packed`, its decision's Lua.
#
# The strategy `policy_live` is the cost of a policy's live buckets: redlimit's own policy Function
# (100/s; 1000/min; 10000/h in 1-minute buckets, as the bench's policy3), FCALLed by
# redis-benchmark at one fixed time on 200 subjects whose hashes were written beforehand as those of
# a subject seen every minute for INSTR_LIVE minutes (default 61: the whole hour live), so that
# every decision reads INSTR_LIVE buckets of the hour limit and one of each other. Two runs at
# different INSTR_LIVE give the instructions a live bucket costs (algorithms.md, work per decision):
#   INSTR_LIVE=1 scripts/instructions.sh build-bench/benchmarks/redlimit_bench policy_live seq
# INSTR_LIVE=0 writes nothing beforehand and sends every call to a subject of its own (a new state).
# The strategy `packed_policy` is the same load on benchmarks/references/packed_policy.lua: that
# policy's common path on a packed string state rather than a hash (its header says what it leaves
# out), its subjects written beforehand with the same buckets. Its figure against policy_live's
# weighs that redesign:
#   INSTR_LIVE=0 scripts/instructions.sh build-bench/benchmarks/redlimit_bench policy_live,packed_policy seq
# INSTR_ANATOMY=1 adds, under each strategy's row, where its instructions go (scripts/lib/anatomy.py):
# the KEYS and ARGV tables Redis builds for the call, the script (its commands, each split into the
# command itself, its reply turned into Lua values and the rest of the call; the C library calls;
# the Lua VM), the reply, and the garbage collector:
#   INSTR_ANATOMY=1 scripts/instructions.sh build-bench/benchmarks/redlimit_bench peer,token_bucket,policy3 seq
# Under valgrind Redis runs ~40x slower, so the bench cycles over 200 subjects (--subjects) rather
# than 10,000: each subject then sees about as many milliseconds between its requests as in a
# normal run, and takes the same paths (a bucket keeps its lease, a window its TTL). INSTR_SUBJECTS
# sets another number: 5000 brings each subject back after its bucket's lease period has passed (a
# new lease, PSETEX), 20000 after its key has expired (a new state), as bench.sh's
# single-decision rows mostly do (each subject comes once or twice in a repetition).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bench=${1:-$root/build-bench/benchmarks/redlimit_bench}
strategies=${2:-fixed_window,sliding_log,sliding_window,sliding_window_p10,token_bucket,leaky_bucket,policy3}
mode=${3:-batch128}
seconds=${4:-3}
subjects=${INSTR_SUBJECTS:-200} # (see below)
for tool in valgrind callgrind_control callgrind_annotate redis-server redis-cli redis-benchmark python3; do
  command -v "$tool" >/dev/null || { echo "instructions.sh: $tool is missing" >&2; exit 2; }
done
[[ -x "$bench" ]] || { echo "instructions.sh: no $bench (build the redlimit_bench target)" >&2; exit 2; }

# shellcheck source=SCRIPTDIR/lib/server.sh
source "$root/scripts/lib/server.sh"

# The reference: rate-limiter-flexible's per-call work, as a Function (see above). The decisions are
# the calls redis-benchmark made: it prints nothing the bench's rows would, so run() writes the row.
PEER_LIBRARY="#!lua name=redlimit_peer_reference
redis.register_function('peer_fixed_window', function(keys, args)
  redis.call('SET', keys[1], 0, 'EX', args[2], 'NX')
  local used = redis.call('INCRBY', keys[1], args[1])
  local ttl = redis.call('PTTL', keys[1])
  if ttl == -1 then redis.call('EXPIRE', keys[1], args[2]) ttl = 1000 * args[2] end
  return {used, ttl}
end)"
# The floor (see above): the state a fixed window of 1000 a minute holds after 5 admissions
# (pack('<I7I6I7', start, 5, window), lua/helpers.lua), written as decimal escapes.
FLOOR_LIBRARY="#!lua name=redlimit_floor_reference
local STATE = '\\0\\214\\252\\254\\138\\96\\6\\5\\0\\0\\0\\0\\0\\0\\135\\147\\3\\0\\0\\0'
redis.register_function('floor_fixed_window', function(keys, args)
  local v = redis.pcall('GET', keys[1])
  if v then redis.call('SETRANGE', keys[1], '0', STATE) else redis.call('PSETEX', keys[1], '61001', STATE) end
  return 60060000994 -- a single admission's reply: reset_after * (limit + 1) + remaining
end)"
# `packed` (see above): the same, through a bucket's state. Its first call packs that state (the
# struct library is not in reach while a library loads).
PACKED_LIBRARY="#!lua name=redlimit_packed_reference
local STATE
redis.register_function('packed_fixed_window', function(keys, args)
  STATE = STATE or struct.pack('<I7I6I7I7I1', 1795000000000000, 995, 17, 60000, 7)
  local v = redis.pcall('GET', keys[1])
  local at, whole, frac, unit, lease = struct.unpack('<I7I6I7I7I1', v or STATE)
  local new = struct.pack('<I7I6I7I7I1', at, whole, frac, unit, lease)
  if v then redis.call('SETRANGE', keys[1], '0', new) else redis.call('PSETEX', keys[1], '61001', new) end
  return 60060000994 -- a single admission's reply: reset_after * (limit + 1) + remaining
end)"
# The design `incr` (see above), on its steady path: the head parsed once, the time parsed and the
# window's end worked out per call, as lua/fixed_window.lua does.
INCR_LIBRARY="#!lua name=redlimit_incr_reference
local head_arg, cost, limit, window
redis.register_function('incr_fixed_window', function(keys, args)
  local now = args[1] + 0
  if args[2] ~= head_arg then
    local c, l, w = string.match(args[2], '^[0-4] (%d+) (%d+) (%d+)\$')
    cost, limit, window, head_arg = tonumber(c), tonumber(l), tonumber(w), args[2]
  end
  local r = now % window
  if r < 0 then r = r + window end
  local reset = window - r
  local used = redis.call('INCRBY', keys[1], cost)
  -- The window's first request: the key lives until the window ends plus helpers.lua's second of
  -- margin, and a block written before the window began is looked for.
  if used == cost then
    redis.call('PEXPIRE', keys[1], string.format('%d', reset / 1000 + 1001))
    local blocked_until = tonumber(redis.call('GET', keys[1] .. ':b'))
    if blocked_until and blocked_until > now then
      redis.call('DECRBY', keys[1], cost)
      return {0, 0, blocked_until - now, blocked_until - now, 0}
    end
  end
  if used > limit then
    redis.call('DECRBY', keys[1], cost)
    return {0, limit - used + cost, reset, reset, 0}
  end
  return reset * (limit + 1) + limit - used -- (lua/epilogue.lua, reply)
end)"
# Runs the reference Function $2 (library $3) for $1 seconds' worth of calls, with arguments $4...
reference_run() {
  local calls=$(($1 * 2000)) # under valgrind: about 2,000 calls a second, one at a time
  if [[ $calls -eq 0 ]]; then # the set-up run: redis-benchmark makes no set-up calls of its own
    echo '{"ops": 0}'
    return
  fi
  redis-cli -p "$SERVER_PORT" FUNCTION LOAD REPLACE "$3" >/dev/null
  redis-benchmark -p "$SERVER_PORT" -c 1 -r 200 -n "$calls" FCALL "$2" 1 "${2%%_*}:__rand_int__" "${@:4}" \
    >/dev/null 2>&1
  echo "{\"ops\": $calls}"
}

# policy_live and packed_policy (see above): the library loaded (redlimit's by a bench run that
# decides nothing), the 200 subjects written once in the strategy's layout ($2: hash or packed),
# then $1 seconds' worth of calls.
LIVE_HEAD='1 1 3 1s 100 1000000 1000000 1m 1000 60000000 60000000 1h@1m 10000 3600000000 60000000'
LIVE_NOW=1795000000000000
LIVE_FILL="local now, live, hash = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3] == 'hash'
local s, m = math.floor(now / 1000000), math.floor(now / 60000000)
for i = 0, 199 do
  local key = string.format('live:%012d', i)
  if hash then
    local fields = {'1s:' .. s, '1', '1m:' .. m, '1'}
    for j = live - 1, 0, -1 do fields[#fields + 1] = '1h@1m:' .. (m - j) fields[#fields + 1] = '1' end
    redis.call('HSET', key, unpack(fields))
    redis.call('PEXPIRE', key, 4000000)
  else
    local values = {1, s, 1, 1, m, 1, live}
    for j = live - 1, 0, -1 do values[#values + 1] = m - j values[#values + 1] = 1 end
    redis.call('PSETEX', key, 4000000, struct.pack('<I1I7I6I1I7I6I1' .. string.rep('I7I6', live), unpack(values)))
  end
end"
live_function() {
  redis-cli -p "$SERVER_PORT" FUNCTION LIST | grep -o "$1" | head -1 || true
}
live_run() {
  local calls=$(($1 * 2000)) live=${INSTR_LIVE:-61} pattern fn range=200
  if [[ $2 == hash ]]; then pattern='redlimit_[0-9a-f]*_policy$'; else pattern='^packed_policy$'; fi
  fn=$(live_function "$pattern")
  if [[ -z "$fn" ]]; then
    if [[ $2 == hash ]]; then
      "$bench" --port "$SERVER_PORT" --suite throughput --strategies policy3 --modes seq --subjects 10 --seconds 0 \
        >/dev/null 2>&1
    else
      redis-cli -p "$SERVER_PORT" FUNCTION LOAD "$(cat "$root/benchmarks/references/packed_policy.lua")" >/dev/null
    fi
    fn=$(live_function "$pattern")
    if [[ $live -gt 0 ]]; then redis-cli -p "$SERVER_PORT" EVAL "$LIVE_FILL" 0 "$LIVE_NOW" "$live" "$2" >/dev/null; fi
  fi
  [[ $live -gt 0 ]] || range=100000000 # a new subject each call
  if [[ $calls -gt 0 ]]; then
    redis-benchmark -p "$SERVER_PORT" -c 1 -r "$range" -n "$calls" FCALL "$fn" 1 "live:__rand_int__" "$LIVE_NOW" \
      "$LIVE_HEAD" >/dev/null 2>&1
  fi
  echo "{\"ops\": $calls}"
}

for strategy in ${strategies//,/ }; do
  start_server valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$SERVER_DIR/cg.out" || exit 1
  run() {
    case "$strategy" in
      peer) reference_run "$1" peer_fixed_window "$PEER_LIBRARY" 1 3600 ;;
      incr) reference_run "$1" incr_fixed_window "$INCR_LIBRARY" 1795000000000000 '1 1 1000 60000000' ;;
      packed) reference_run "$1" packed_fixed_window "$PACKED_LIBRARY" 1795000000000000 '1 1 1000 60000000' ;;
      policy_live) live_run "$1" hash ;;
      packed_policy) live_run "$1" packed ;;
      floor) reference_run "$1" floor_fixed_window "$FLOOR_LIBRARY" 1795000000000000 '1 1 1000 60000000' ;;
      *) "$bench" --port "$SERVER_PORT" --suite throughput --strategies "$strategy" --modes "$mode" --subjects "$subjects" \
        --seconds "$1" ;;
    esac
  }
  run 1 >/dev/null 2>&1
  callgrind_control -i on "$SERVER_PID" >/dev/null 2>&1
  # The bench's own set-up is FCALLs too (a consume of every strategy, to load the scripts; a few
  # peeks, to open its connections): a run of 0 seconds makes those alone, counted in a dump of its
  # own and taken off the measured run's, so that the figure is the decisions' alone however few a
  # slow machine makes in SECONDS (a fixed cost over fewer decisions would grow it).
  run 0 >/dev/null 2>&1
  callgrind_control -d "$SERVER_PID" >/dev/null 2>&1
  run "$seconds" 2>/dev/null >"$SERVER_DIR/rows.json"
  callgrind_control -d "$SERVER_PID" >/dev/null 2>&1
  callgrind_control -i off "$SERVER_PID" >/dev/null 2>&1
  stop_server
  # A dump's instructions inside FCALL. awk reads to the end: leaving at the first match would end
  # callgrind_annotate with SIGPIPE, which pipefail turns into this script's failure.
  fcall_ir() {
    callgrind_annotate --inclusive=yes "$1" 2>/dev/null |
      awk '/fcallCommand/ && !found {gsub(",", "", $1); print $1; found = 1} END {if (!found) print 0}'
  }
  setup_ir=$(fcall_ir "$SERVER_DIR/cg.out.1")
  run_ir=$(fcall_ir "$SERVER_DIR/cg.out.2")
  # The decisions the measured run made, read once for the row and the anatomy below.
  ops=$(python3 -c 'import json, sys; print(sum(json.loads(l)["ops"] for l in open(sys.argv[1]) if l.strip()))' \
    "$SERVER_DIR/rows.json")
  python3 - "$strategy" "$mode" "$((run_ir - setup_ir))" "$ops" <<'PY'
import sys
strategy, mode, ir, ops = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
if ops == 0 or ir <= 0:
    sys.exit(f"instructions.sh: {strategy} {mode}: nothing measured")
print(f"{strategy:20} {mode:10} {ops:7d} decisions  {ir / ops:9.0f} instructions a decision in FCALL")
PY
  if [[ -n "${INSTR_ANATOMY:-}" ]]; then # (see above)
    python3 "$root/scripts/lib/anatomy.py" "$SERVER_DIR/cg.out.2" "$SERVER_DIR/cg.out.1" "$ops"
  fi
  rm -f "$SERVER_DIR"/cg.out*
done
