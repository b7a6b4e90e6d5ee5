-- Leaky bucket: a bucket of `capacity` that leaks at a constant rate; a request pours `cost` in.
--   meter:  what does not fit is rejected; admitted requests proceed now (this is GCRA).
--   shaper: the bucket is a queue; what fits is admitted with a delay, the time for the water
--           ahead of it to leak out, so admitted work leaves at the leak rate.
--
-- KEYS: one per request (prologue.lua): the state, which holds its block
-- state: pack(BUCKET, at, whole, frac, unit, lease), see helpers.lua: the bucket held whole * unit +
--        frac ticks of water (whole requests and frac ticks of the next) at time <at> (us); the
--        lease says how long the key's TTL runs (bucket_ttl)
-- ARGV[1..2] now; the head: mode, cost, then the parameters (prologue.lua; helpers.lua, params)
--          "<capacity> <unit> <leak> <mode>": the capacity (requests), the ticks per request, the
--          ticks that leak out per microsecond, and "meter" or "shaper"
-- Returns {allowed 0|1, remaining, retry_after_us, reset_after_us, delay_us}
--
-- Time math: the leak rate is R requests per T microseconds. The client picks g = gcd(R, T),
-- unit = T / g and leak = R / g, so R requests (R * unit ticks) drain in exactly T microseconds
-- and all math stays in integers; products of a time and a rate go through muldiv (helpers.lua),
-- exact for capacities up to 2^40 and any rate that drains the bucket within ten years. With
-- water = whole * unit + frac, a request of `cost` fits when whole + cost + (frac > 0 ? 1 : 0) <=
-- capacity. A missing key is an empty bucket. A stored time ahead of ours (a client whose clock
-- runs ahead) is taken as now: nothing leaks backwards, and the waits we return include the
-- difference. A refund takes water out; for a shaper, delays already handed out are not
-- shortened. Reconfigured: water stays water (clamped to a new capacity); a part request is
-- rescaled to a new rate, rounded up.
local capacity, unit, leak, shaper -- this call's parameters (params)
local params_arg -- the string they were parsed from (helpers.lua, params)
local state_is_string, width, prefetch = true, 5, nil -- (epilogue.lua: an MGET reads it)
local most_cost -- the largest cost the call's bucket can admit: its capacity (helpers.lua, cost_above)

-- Microseconds until `whole` requests and `frac` ticks have leaked: ceil((whole * unit + frac) / leak).
local function time_to_empty(whole, frac)
  local q, r = muldiv(whole, unit, leak)
  return q + ceil_div(r + frac, leak)
end

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
    whole, frac, at, t0, ahead = 0, 0, now, now, 0
  else
    whole, frac, at, t0, ahead, lease = read_bucket(now, v, 0, capacity, unit, true)
  end
  -- Leak since `at`: elapsed * leak ticks, divided inline when below 2^52 (helpers.lua, TWO52);
  -- past it, the elapsed time is compared with the time to empty first, so that the product is
  -- only formed (by muldiv) when it stays below the water held.
  local elapsed = t0 - at
  local p = elapsed * leak
  if elapsed <= 0 then -- nothing leaked
  elseif p < TWO52 then
    local r = p % unit
    if r < 0 then r = r + unit end
    whole, frac = whole - (p - r) / unit, frac - r
    if frac < 0 then whole, frac = whole - 1, frac + unit end
    if whole < 0 then whole, frac = 0, 0 end
  elseif elapsed >= time_to_empty(whole, frac) then
    whole, frac = 0, 0
  else
    local q, r = muldiv(elapsed, leak, unit)
    whole, frac = whole - q, frac - r
    if frac < 0 then whole, frac = whole - 1, frac + unit end
  end

  local part = (frac > 0) and 1 or 0
  local allowed = refund or whole + cost + part <= capacity
  local delay = 0
  if allowed and shaper and not refund then delay = ahead + time_to_empty(whole, frac) end -- water ahead leaks first
  local changed = false
  if refund then
    changed = whole > 0 or frac > 0
    whole = whole - cost
    if whole < 0 then whole, frac = 0, 0 end
  elseif allowed and record then
    whole = whole + cost
    changed = true
  end
  local to_empty -- time_to_empty(whole, frac), inline below 2^52
  local w = whole * unit + frac
  if w < TWO52 then
    local r = w % leak
    if r < 0 then r = r + leak end
    to_empty = (w - r) / leak + ((r > 0) and 1 or 0)
  else
    to_empty = time_to_empty(whole, frac)
  end
  local new, ttl = nil, nil
  if changed then
    if to_empty > 0 then
      local need = to_empty
-- Part: parts/bucket_write.lua
    else
      new = false -- empty is what a missing key means
    end
  end

  local retry_after = 0
  if not allowed then
    -- The water above capacity once this request is in: (whole + cost - capacity) * unit + frac
    -- ticks, with whole + cost - capacity >= 0 since it did not fit.
    local q, r = muldiv(whole + cost - capacity, unit, leak)
    retry_after = ahead + q + ceil_div(r + frac, leak)
  end
  local reset_after = 0
  if to_empty > 0 then reset_after = ahead + to_empty end
  return allowed and 1 or 0, capacity - whole - ((frac > 0) and 1 or 0), retry_after, reset_after, delay, 1, new, ttl
end

-- Per call: -------------------------------------------------------------------------------------
if params ~= params_arg then
  local p = words(params) -- checked (helpers.lua, param_rate), then kept: params_arg is set last
  param_words(p, 4, 'a leaky bucket')
  if p[4] ~= 'meter' and p[4] ~= 'shaper' then
    error('redlimit: parameter 4 (mode) is not meter or shaper: ' .. p[4], 0)
  end
  capacity, unit, leak = param_rate(p)
  shaper = p[4] == 'shaper'
  most_cost = capacity
  params_arg = params
end
