-- Prologue: prepended at build time to every script in this folder, and epilogue.lua appended to
-- those that define decide() (cmake/embed_lua.cmake), so the shared conventions live in one place.
-- A script's decide() judges one request; the epilogue runs the call's requests through it.
--
-- One call decides n >= 1 requests of one strategy, in order (consume_many sends many):
-- KEYS[2i-1]  request i's state, for one (resource, subject)
-- KEYS[2i]    request i's block marker: a string holding "blocked until" in us (see block.lua)
-- ARGV[1]  now: microseconds since the Unix epoch from the client's clock, or "redis" to read
--          Redis TIME here (one clock for every client, no extra round trip); one now for all n
-- ARGV[2]  cost of request 1: units to take, or to give back when refunding (>= 1, checked by the
--          client)
-- ARGV[3]  mode: "1" consume (record if admitted), "0" peek (record nothing), "2" refund,
--          "3" block (block.lua only)
-- ARGV[4..]  the strategy's parameters, named in each script
-- ARGV[#ARGV-n+2 .. #ARGV]  the costs of requests 2..n (none when n = 1)
-- Returns request 1's decision when n = 1, otherwise the n decisions one after the other.
--
-- Every time and quantity is an integer held in a Lua double, exact below 2^53: microsecond
-- timestamps until 2255, and the client keeps every product of the math below 2^52.
-- math.fmod is exact on such integers, so floor_div/ceil_div are too. Numbers are written back
-- with fmt(): Lua's own tostring keeps only 14 digits, and '%d' formats an integer directly
-- where '%.0f' would run the C library's slower floating-point printer.
local now = tonumber(ARGV[1])
if not now then
  if redis.replicate_commands then redis.replicate_commands() end -- Redis < 5: allow writes after TIME
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local mode = ARGV[3]
local record = mode == '1'
local refund = mode == '2'

-- The library functions the scripts call per request, as locals: a global lookup and a field
-- lookup less each time, which a batch of hundreds of requests notices.
local fmod, max, min, format, pack, unpack_ = math.fmod, math.max, math.min, string.format, struct.pack, struct.unpack

local function fmt(x) return format('%d', x) end
local function floor_div(a, b) return (a - fmod(a, b)) / b end
local function ceil_div(a, b)
  local r = fmod(a, b)
  return (a - r) / b + ((r > 0) and 1 or 0)
end
-- PEXPIRE/PX argument for a state that is back to its empty value `us` from now. Redis counts
-- expiry in whole milliseconds of its own clock and may be up to 1 ms into the current one, so a
-- TTL of ceil(us / 1000) could end before `us` has passed: one more millisecond keeps the state
-- alive at least as long as it matters.
local function ttl_ms(us) return ceil_div(max(us, 0), 1000) + 1 end

-- String states (fixed window, token and leaky buckets) hold two non-negative integers packed
-- little-endian: a time in 7 bytes, then a quantity in 5 bytes (8 past 2^40). 12 bytes fit Redis's
-- smallest embedded-string block, where "quantity:time" in decimal takes about 25 (MEMORY USAGE
-- 88 B per subject instead of 104 B). Anything else (a state written by an older version) reads
-- as no state.
local function pack2(t, q)
  if q < 1099511627776 then return pack('<I7I5', t, q) end
  return pack('<I7I8', t, q)
end
local function unpack2(v)
  local len = #v
  if len == 12 then return unpack_('<I7I5', v) end
  if len == 15 then return unpack_('<I7I8', v) end
  return nil
end

-- A bucket's stored state (token and leaky buckets): its level (at most `full`) at time `at`, or
-- `missing` at now without one; t0, the later of now and `at` (a client whose clock runs ahead
-- wrote it: nothing moves backwards), and ahead = t0 - now, which the waits returned include.
local function read_bucket(v, missing, full)
  local level, at = missing, now
  if v then
    local t, l = unpack2(v)
    if t then level, at = min(l, full), t end
  end
  local t0 = max(now, at)
  return level, at, t0, t0 - now
end
