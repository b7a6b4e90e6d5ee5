-- Token bucket: up to `capacity` tokens, refilled continuously; a request takes `cost` tokens.
--
-- KEYS: one per request (prologue.lua): the state, which holds its block
-- state: pack(BUCKET, at, whole, frac, unit, lease), see helpers.lua: the bucket held whole * unit +
--        frac ticks (whole tokens and frac ticks of the next) at time <at> (us); the lease says
--        how long the key's TTL runs (bucket_ttl)
-- ARGV[1..2] now; the head: mode, cost, then the parameters (prologue.lua; helpers.lua, params)
--          "<capacity> <unit> <refill>": the capacity (tokens), the ticks per token, and the ticks
--          added per microsecond
-- Returns {allowed 0|1, remaining, retry_after_us, reset_after_us, delay_us = 0}
--
-- Time math: the rate is R tokens per T microseconds, rarely a whole number of microseconds per
-- token. The client picks g = gcd(R, T), unit = T / g and refill = R / g: R tokens (R * unit
-- ticks) then arrive in exactly T microseconds, and all math stays in integers. The level is kept
-- as whole tokens plus ticks of the next (helpers.lua), and every product of a time and a rate
-- goes through muldiv, so it is exact for capacities up to 2^40 and any rate that fills the bucket
-- within ten years (checked by the client). A request of `cost` fits when whole >= cost. A missing
-- key is a full bucket. A stored time ahead of ours (a client whose clock runs ahead) is taken as
-- now: no refill runs backwards, and the waits we return include the difference. A refund puts
-- tokens back, up to the capacity. Reconfigured: tokens stay tokens (clamped to a new capacity);
-- the part of a token already refilled is rescaled to a new rate, rounded down.
local capacity, unit, refill -- this call's: capacity (tokens), ticks per token, ticks per us
local params_arg -- the string they were parsed from (helpers.lua, params)
local state_is_string, width, prefetch = true, 5, nil -- (epilogue.lua: an MGET reads it)
local most_cost -- the largest cost the call's bucket can admit: its capacity (helpers.lua, cost_above)

local function decide(_, cost, v)
  -- read_bucket's common cases inline (no state; a state of this limit's unit written by now): a
  -- Lua call costs Redis about as much as the work around it (2% of a single decision's
  -- instructions, callgrind on Redis 7.0). Anything else goes through it.
  local whole, frac, at, t0, ahead, lease, u
  if v and #v == 28 then at, whole, frac, u, lease = unpack_(BUCKET, v) end
  if u == unit and frac < unit and at <= now then
    if whole >= capacity then whole, frac = capacity, 0 end
    t0, ahead = now, 0
  elseif not v then
    whole, frac, at, t0, ahead = capacity, 0, now, now, 0
  else
    whole, frac, at, t0, ahead, lease = read_bucket(now, v, capacity, capacity, unit, false)
  end
  -- Refill since `at`: elapsed * refill ticks, divided inline when below 2^52 (helpers.lua, TWO52);
  -- past it, the elapsed time is compared with the time to full first, so that the product is
  -- only formed (by muldiv) when it stays below a bucketful.
  local elapsed = t0 - at
  if whole >= capacity then
    whole, frac = capacity, 0
  elseif elapsed > 0 then
    local p = elapsed * refill
    if p < TWO52 then
      local r = p % unit
      if r < 0 then r = r + unit end
      whole, frac = whole + (p - r) / unit, frac + r
      if frac >= unit then whole, frac = whole + 1, frac - unit end
      if whole >= capacity then whole, frac = capacity, 0 end
    elseif elapsed >= time_to(capacity, whole, frac, unit, refill) then
      whole, frac = capacity, 0
    else
      local q, r = muldiv(elapsed, refill, unit)
      whole, frac = whole + q, frac + r
      if frac >= unit then whole, frac = whole + 1, frac - unit end
    end
  end

  local allowed = refund or whole >= cost
  local changed = false
  if refund then
    changed = whole < capacity
    whole = whole + cost
    if whole >= capacity then whole, frac = capacity, 0 end
  elseif allowed and record then
    whole = whole - cost
    changed = true
  end
  local to_full = 0
  if whole < capacity then -- time_to(capacity, ...), inline below 2^52
    local m = (capacity - whole) * unit - frac
    if m < TWO52 then
      local r = m % refill
      if r < 0 then r = r + refill end
      to_full = (m - r) / refill + ((r > 0) and 1 or 0)
    else
      to_full = time_to(capacity, whole, frac, unit, refill)
    end
  end
  local new, ttl = nil, nil
  if changed then
    if whole < capacity then
      local need = to_full
-- Part: parts/bucket_write.lua
    else
      new = false -- full is what a missing key means
    end
  end

  local retry_after = 0
  if not allowed then retry_after = ahead + time_to(cost, whole, frac, unit, refill) end
  local reset_after = 0
  if whole < capacity then reset_after = ahead + to_full end
  return allowed and 1 or 0, whole, retry_after, reset_after, 0, 1, new, ttl
end

-- Per call: -------------------------------------------------------------------------------------
if params ~= params_arg then
  local p = words(params) -- checked (helpers.lua, param_rate), then kept: params_arg is set last
  param_words(p, 3, 'a token bucket')
  capacity, unit, refill = param_rate(p)
  most_cost = capacity
  params_arg = params
end
