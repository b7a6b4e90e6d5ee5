-- Token bucket: up to `capacity` tokens, refilled continuously; a request takes `cost` tokens.
--
-- KEYS[1]  string "<level>:<at>": the bucket held <level> units at time <at> (us)
-- ARGV[1]  now: microseconds since the Unix epoch, or "redis" to read Redis TIME here
-- ARGV[2]  cost: tokens this request takes (1 <= cost <= capacity, checked by the client)
-- ARGV[3]  "1" records an admitted request (consume), "0" only looks (peek)
-- ARGV[4]  capacity (tokens)
-- ARGV[5]  unit: units per token
-- ARGV[6]  refill: units added per microsecond
-- Returns {allowed 0|1, remaining, retry_after_us, reset_after_us, delay_us = 0}
--
-- Time math. The rate is R tokens per T microseconds, rarely a whole number of microseconds per
-- token. The client picks g = gcd(R, T), unit = T / g and refill = R / g: then R tokens (R * unit
-- units) arrive in exactly T microseconds, and all math is in integers (the client checks that
-- capacity * unit < 2^52, so every value is exact in a double). A missing key is a full bucket.
-- A stored time ahead of ours (a client whose clock runs ahead) is taken as now: no refill runs
-- backwards, and the waits we return include the difference.
local key = KEYS[1]
local now = tonumber(ARGV[1])
if not now then
  if redis.replicate_commands then redis.replicate_commands() end -- Redis < 5: allow writes after TIME
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local cost = tonumber(ARGV[2])
local record = ARGV[3] == '1'
local capacity = tonumber(ARGV[4])
local unit = tonumber(ARGV[5])
local refill = tonumber(ARGV[6])

local function fmt(x) return string.format('%.0f', x) end
local function floor_div(a, b) return (a - math.fmod(a, b)) / b end
local function ceil_div(a, b)
  local r = math.fmod(a, b)
  return (a - r) / b + ((r > 0) and 1 or 0)
end

local full = capacity * unit
local level, at = full, now
local v = redis.call('GET', key)
if v then
  local l, t = string.match(v, '^(%d+):(%d+)$')
  if l then level, at = math.min(tonumber(l), full), tonumber(t) end
end
local t0 = math.max(now, at)
local ahead = t0 - now
-- Refill since `at`. Compare elapsed time, not elapsed * refill, which could leave 2^53 after a long idle.
if t0 - at >= ceil_div(full - level, refill) then
  level = full
else
  level = level + (t0 - at) * refill
end

local need = cost * unit
local allowed = level >= need
if allowed and record then
  level = level - need
  local ttl = ahead + ceil_div(full - level, refill) -- until full again
  redis.call('SET', key, fmt(level) .. ':' .. fmt(t0), 'PX', math.max(1, ceil_div(ttl, 1000)))
end

local retry_after = 0
if not allowed then retry_after = ahead + ceil_div(need - level, refill) end
local reset_after = 0
if level < full then reset_after = ahead + ceil_div(full - level, refill) end
return {allowed and 1 or 0, floor_div(level, unit), retry_after, reset_after, 0}
