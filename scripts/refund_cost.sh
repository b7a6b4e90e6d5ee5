#!/usr/bin/env bash
# Redis's time for one sliding-log refund of a big log (lua/sliding_log.lua, give_back and
# cut_above), the figure docs/algorithms.md quotes: a throwaway redis-server on a free loopback port
# (scripts/lib/server.sh) loads the library from the generated header, gets a log of ENTRIES entries
# of cost 1 (text members, one a microsecond, written by one EVAL), and takes one FCALL refunding
# BACK units of it; the line printed is that FCALL's usec from INFO commandstats, the reply, and
# what is left (entries, TTL in ms). Each size runs REPEAT times on a fresh server, since one call's
# time on this machine moves by a factor of two.
#
#   scripts/refund_cost.sh [LUA_SOURCES_HPP] [ENTRIES] [BACK...]
#     defaults: build/generated/include/redlimit/detail/lua_sources.hpp, 1000000, 999990 500000 9990
#   REPEAT=3 (the default)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
header=${1:-$root/build/generated/include/redlimit/detail/lua_sources.hpp}
entries=${2:-1000000}
shift $(($# > 2 ? 2 : $#))
backs=("$@")
[[ ${#backs[@]} -gt 0 ]] || backs=(999990 500000 9990)
[[ -f "$header" ]] || { echo "refund_cost.sh: no $header (build the library first)" >&2; exit 1; }
source "$root/scripts/lib/server.sh"

# The library text: the raw string `library` of the generated header (cmake/embed_lua.cmake).
python3 - "$header" >"$SERVER_DIR/library.lua" <<'PY'
import sys
text = open(sys.argv[1]).read()
open_mark = 'library = R"redlimit_lua('
start = text.index(open_mark) + len(open_mark)
print(text[start:text.index(')redlimit_lua"', start)])
PY
FILL="local t0, n = tonumber(ARGV[1]), tonumber(ARGV[2])
for from = 0, n - 1, 1000 do
  local args = {}
  for i = from, math.min(from + 999, n - 1) do
    args[#args + 1] = string.format('%d', t0 + i)
    args[#args + 1] = string.format('%016d/%d', i + 1, 1)
  end
  redis.call('ZADD', KEYS[1], unpack(args))
end
redis.call('PEXPIRE', KEYS[1], 100000000)"
T0=1795000000000000
now=$((T0 + entries + 1000))

for back in "${backs[@]}"; do
  for _ in $(seq "${REPEAT:-3}"); do
    start_server || exit 1
    cli() { redis-cli -p "$SERVER_PORT" "$@"; }
    cli -x FUNCTION LOAD <"$SERVER_DIR/library.lua" >/dev/null
    fn=$(cli FUNCTION LIST | grep -o 'redlimit_[0-9a-f]*_sliding_log$' | head -1)
    cli EVAL "$FILL" 1 log "$T0" "$entries" >/dev/null
    cli CONFIG RESETSTAT >/dev/null
    reply=$(cli FCALL "$fn" 1 log "$now" "2 $back $((entries + 10)) 3600000000000" | tr '\n' ' ')
    usec=$(cli INFO commandstats | sed -nE 's/^cmdstat_fcall:calls=1,usec=([0-9]+),.*/\1/p')
    echo "entries $entries, refund $back: ${usec} us; reply ${reply}; left $(cli ZCARD log) entries, TTL $(cli PTTL log) ms"
    stop_server
  done
done
