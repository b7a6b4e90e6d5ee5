-- Prologue: prepended at build time to every script in this folder (cmake/embed_lua.cmake), so
-- the shared conventions live in one place. Each script's own header names its KEYS and ARGV.
--
-- KEYS[1]  the strategy's state for one (resource, subject)
-- KEYS[2]  the subject's block marker: a string holding "blocked until" in us (see block.lua)
-- ARGV[1]  now: microseconds since the Unix epoch from the client's clock, or "redis" to read
--          Redis TIME here (one clock for every client, no extra round trip)
-- ARGV[2]  cost: units to take, or to give back when refunding (>= 1, checked by the client)
-- ARGV[3]  mode: "1" consume (record if admitted), "0" peek (record nothing), "2" refund,
--          "3" block (block.lua only)
--
-- Every time and quantity is an integer held in a Lua double, exact below 2^53: microsecond
-- timestamps until 2255, and the client keeps every product of the math below 2^52.
-- math.fmod is exact on such integers, so floor_div/ceil_div are too. Numbers are written back
-- with fmt(): Lua's own tostring keeps only 14 digits.
local now = tonumber(ARGV[1])
if not now then
  if redis.replicate_commands then redis.replicate_commands() end -- Redis < 5: allow writes after TIME
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local cost = tonumber(ARGV[2])
local mode = ARGV[3]
local record = mode == '1'
local refund = mode == '2'
local blocking = mode == '3'

local function fmt(x) return string.format('%.0f', x) end
local function floor_div(a, b) return (a - math.fmod(a, b)) / b end
local function ceil_div(a, b)
  local r = math.fmod(a, b)
  return (a - r) / b + ((r > 0) and 1 or 0)
end
-- PEXPIRE/PX argument for a state that is back to its empty value `us` from now: at least 1 ms.
local function ttl_ms(us) return math.max(1, ceil_div(us, 1000)) end

-- A blocked subject is rejected until the block ends, whatever its quota; refunds still apply.
if not refund and not blocking then
  local blocked_until = tonumber(redis.call('GET', KEYS[2]))
  if blocked_until and blocked_until > now then
    return {0, 0, blocked_until - now, blocked_until - now, 0}
  end
end
