-- Leaky bucket: a bucket of `capacity` that leaks at a constant rate; a request pours `cost` in.
--   meter:  what does not fit is rejected; admitted requests proceed now (this is GCRA).
--   shaper: the bucket is a queue; what fits is admitted with a delay, the time for the water
--           ahead of it to leak out, so admitted work leaves at the leak rate.
--
-- KEYS: two per request (prologue.lua): the state, then the block marker
-- state: pack2(at, level), see prologue.lua: the bucket held <level> units of water at time <at> (us)
-- ARGV[1..3] now, cost, mode (prologue)
-- ARGV[4]  capacity (requests)
-- ARGV[5]  unit: units per request
-- ARGV[6]  leak: units that leak out per microsecond
-- ARGV[7]  "meter" or "shaper"
-- Returns {allowed 0|1, remaining, retry_after_us, reset_after_us, delay_us}
--
-- Time math: the leak rate is R requests per T microseconds. The client picks g = gcd(R, T),
-- unit = T / g and leak = R / g, so R requests (R * unit units) drain in exactly T microseconds
-- and all math stays in integers. A missing key is an empty bucket. A stored time ahead of ours
-- (a client whose clock runs ahead) is taken as now: nothing leaks backwards, and the waits we
-- return include the difference. A refund takes water out; for a shaper, delays already handed
-- out are not shortened.
local capacity = tonumber(ARGV[4])
local unit = tonumber(ARGV[5])
local leak = tonumber(ARGV[6])
local shaper = ARGV[7] == 'shaper'
local full = capacity * unit
local state_is_string, width = true, 5

local function decide(_, cost, v)
  local level, at, t0, ahead = read_bucket(v, 0, full)
  -- Leak since `at`: compare elapsed time, not elapsed * leak, which could pass 2^53 after a long
  -- idle.
  if t0 - at >= ceil_div(level, leak) then
    level = 0
  else
    level = level - (t0 - at) * leak
  end

  local need = cost * unit
  local allowed = refund or level + need <= full
  local delay = 0
  if allowed and shaper and not refund then delay = ahead + ceil_div(level, leak) end -- water ahead leaks first
  local changed = false
  if refund then
    changed = level > 0
    level = max(0, level - need)
  elseif allowed and record then
    level = level + need
    changed = true
  end
  local new, ttl = nil, nil
  if changed then
    if level > 0 then
      new, ttl = pack2(t0, level), ttl_ms(ahead + ceil_div(level, leak))
    else
      new = false -- empty is what a missing key means
    end
  end

  local retry_after = 0
  if not allowed then retry_after = ahead + ceil_div(level + need - full, leak) end
  local reset_after = 0
  if level > 0 then reset_after = ahead + ceil_div(level, leak) end
  return allowed and 1 or 0, floor_div(full - level, unit), retry_after, reset_after, delay, 1, new, ttl
end
