-- Leaky bucket: a bucket of `capacity` that leaks at a constant rate; a request pours `cost` in.
--   meter:  what does not fit is rejected; admitted requests proceed now (GCRA).
--   shaper: the bucket is a queue; what fits is admitted with a delay, the time for the water
--           ahead of it to leak out, so admitted work leaves at the leak rate.
--
-- KEYS[1]  string "<level>:<at>": the bucket held <level> units of water at time <at> (us)
-- ARGV[1]  now: microseconds since the Unix epoch, or "redis" to read Redis TIME here
-- ARGV[2]  cost: requests this call pours in (1 <= cost <= capacity, checked by the client)
-- ARGV[3]  "1" records an admitted request (consume), "0" only looks (peek)
-- ARGV[4]  capacity (requests)
-- ARGV[5]  unit: units per request
-- ARGV[6]  leak: units that leak out per microsecond
-- ARGV[7]  mode: "meter" or "shaper"
-- Returns {allowed 0|1, remaining, retry_after_us, reset_after_us, delay_us}
--
-- Time math. The leak rate is R requests per T microseconds. The client picks g = gcd(R, T),
-- unit = T / g and leak = R / g, so R requests (R * unit units) drain in exactly T microseconds and
-- everything is an integer (the client checks capacity * unit < 2^52: exact in a double). A missing
-- key is an empty bucket. A stored time ahead of ours (a client whose clock runs ahead) is taken as
-- now: nothing leaks backwards, and the waits we return include the difference.
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
local leak = tonumber(ARGV[6])
local shaper = ARGV[7] == 'shaper'

local function fmt(x) return string.format('%.0f', x) end
local function floor_div(a, b) return (a - math.fmod(a, b)) / b end
local function ceil_div(a, b)
  local r = math.fmod(a, b)
  return (a - r) / b + ((r > 0) and 1 or 0)
end

local full = capacity * unit
local level, at = 0, now
local v = redis.call('GET', key)
if v then
  local l, t = string.match(v, '^(%d+):(%d+)$')
  if l then level, at = tonumber(l), tonumber(t) end
end
local t0 = math.max(now, at)
local ahead = t0 - now
-- Leak since `at`. Compare elapsed time, not elapsed * leak, which could leave 2^53 after a long idle.
if t0 - at >= ceil_div(level, leak) then
  level = 0
else
  level = level - (t0 - at) * leak
end

local need = cost * unit
local allowed = level + need <= full
local delay = 0
if allowed and shaper then delay = ahead + ceil_div(level, leak) end -- the water ahead must leak first
if allowed and record then
  level = level + need
  redis.call('SET', key, fmt(level) .. ':' .. fmt(t0), 'PX', math.max(1, ceil_div(ahead + ceil_div(level, leak), 1000)))
end

local retry_after = 0
if not allowed then retry_after = ahead + ceil_div(level + need - full, leak) end
local reset_after = 0
if level > 0 then reset_after = ahead + ceil_div(level, leak) end
return {allowed and 1 or 0, floor_div(full - level, unit), retry_after, reset_after, delay}
