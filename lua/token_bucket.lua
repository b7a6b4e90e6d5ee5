-- Token bucket: up to `capacity` tokens, refilled continuously; a request takes `cost` tokens.
--
-- KEYS: two per request (prologue.lua): the state, then the block marker
-- state: pack2(at, level), see prologue.lua: the bucket held <level> units at time <at> (us)
-- ARGV[1..3] now, cost, mode (prologue)
-- ARGV[4]  capacity (tokens)
-- ARGV[5]  unit: units per token
-- ARGV[6]  refill: units added per microsecond
-- Returns {allowed 0|1, remaining, retry_after_us, reset_after_us, delay_us = 0}
--
-- Time math: the rate is R tokens per T microseconds, rarely a whole number of microseconds per
-- token. The client picks g = gcd(R, T), unit = T / g and refill = R / g: R tokens (R * unit
-- units) then arrive in exactly T microseconds, and all math stays in integers. A missing key is a
-- full bucket. A stored time ahead of ours (a client whose clock runs ahead) is taken as now: no
-- refill runs backwards, and the waits we return include the difference. A refund puts tokens
-- back, up to the capacity.
local capacity = tonumber(ARGV[4])
local unit = tonumber(ARGV[5])
local refill = tonumber(ARGV[6])
local full = capacity * unit
local state_is_string, width = true, 5

local function decide(_, cost, v)
  local level, at, t0, ahead = read_bucket(v, full, full)
  -- Refill since `at`: compare elapsed time, not elapsed * refill, which could pass 2^53 after a
  -- long idle.
  if t0 - at >= ceil_div(full - level, refill) then
    level = full
  else
    level = level + (t0 - at) * refill
  end

  local need = cost * unit
  local allowed = refund or level >= need
  local changed = false
  if refund then
    changed = level < full
    level = min(full, level + need)
  elseif allowed and record then
    level = level - need
    changed = true
  end
  local new, ttl = nil, nil
  if changed then
    if level < full then
      new, ttl = pack2(t0, level), ttl_ms(ahead + ceil_div(full - level, refill))
    else
      new = false -- full is what a missing key means
    end
  end

  local retry_after = 0
  if not allowed then retry_after = ahead + ceil_div(need - level, refill) end
  local reset_after = 0
  if level < full then reset_after = ahead + ceil_div(full - level, refill) end
  return allowed and 1 or 0, floor_div(level, unit), retry_after, reset_after, 0, 1, new, ttl
end
