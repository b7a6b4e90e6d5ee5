-- Sliding window counter: admitted units counted in buckets of `precision`; the window is the
-- buckets inside it plus the oldest bucket, weighted by the part of it still inside the window.
--
-- KEYS[1]  hash of one subject: field = bucket index floor(t / precision), value = units admitted
-- ARGV[1]  now: microseconds since the Unix epoch, or "redis" to read Redis TIME here
-- ARGV[2]  cost: units this request takes (1 <= cost <= limit, checked by the client)
-- ARGV[3]  "1" records an admitted request (consume), "0" only looks (peek)
-- ARGV[4]  limit: units admitted per window
-- ARGV[5]  window length (us)
-- ARGV[6]  precision: bucket length (us); divides the window, so n = window / precision buckets
-- Returns {allowed 0|1, remaining, retry_after_us, reset_after_us, delay_us = 0}
--
-- Time math. Let P = precision, r = now mod P, b = (now - r) / P the current bucket. The window
-- (now - window, now] holds buckets b-n+1 .. b entirely and bucket b-n only from now - window to
-- its end, (b-n+1)*P: that is P - r of its P microseconds, so its units weigh (P - r) / P.
--   used = full + old * (P - r) / P
-- Everything is compared multiplied by P, in integers: the client checks limit * P < 2^52, so every
-- product is exact in a double. With P = window (n = 1) this is the classic two-window counter:
-- 100 units in the first quarter of minute 0 weigh 75 at 1.25 min, leaving room for 25.
local key = KEYS[1]
local now = tonumber(ARGV[1])
if not now then
  if redis.replicate_commands then redis.replicate_commands() end -- Redis < 5: allow writes after TIME
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local cost = tonumber(ARGV[2])
local record = ARGV[3] == '1'
local limit = tonumber(ARGV[4])
local window = tonumber(ARGV[5])
local P = tonumber(ARGV[6])

local function fmt(x) return string.format('%.0f', x) end
local function floor_div(a, b) return (a - math.fmod(a, b)) / b end
local function ceil_div(a, b)
  local r = math.fmod(a, b)
  return (a - r) / b + ((r > 0) and 1 or 0)
end

local n = window / P
local r = math.fmod(now, P)
local b = (now - r) / P

local counts = {} -- bucket index -> units, for the buckets that still count
local full = 0    -- units in buckets after b-n (buckets ahead of b come from clients whose clock is ahead)
local old = 0     -- units in bucket b-n
local newest = nil
local stale = {}
local h = redis.call('HGETALL', key)
for i = 1, #h, 2 do
  local idx = tonumber(h[i])
  local c = tonumber(h[i + 1])
  if idx >= b - n then
    counts[idx] = c
    if idx == b - n then old = c else full = full + c end
    if not newest or idx > newest then newest = idx end
  else
    stale[#stale + 1] = h[i]
  end
end

local usedP = full * P + old * (P - r)
local allowed = usedP + cost * P <= limit * P
if allowed and record then
  redis.call('HINCRBY', key, fmt(b), cost)
  for i = 1, #stale, 1000 do -- unpack() has a stack limit: delete in slices
    redis.call('HDEL', key, unpack(stale, i, math.min(i + 999, #stale)))
  end
  usedP = usedP + cost * P
  counts[b] = (counts[b] or 0) + cost
  if not newest or b > newest then newest = b end
end

local retry_after = 0
if not allowed then
  -- Walk forward one bucket interval at a time. During [(b+k)P, (b+k+1)P) bucket b+k-n is the
  -- weighted one and `s` units sit in the buckets after it. The request fits at d microseconds into
  -- the interval when s + cost + o * (P - d) / P <= limit, i.e. d >= P - floor(x * P / o) with
  -- x = limit - s - cost. The first interval with a d < P gives the exact earliest time.
  local last = math.max(newest or b, b)
  local s = full
  for k = 0, last - b + n + 1 do
    local o = counts[b + k - n] or 0
    if k > 0 then s = s - o end
    local x = limit - s - cost
    if x >= 0 then
      local d = 0
      if o > 0 then d = math.max(0, P - floor_div(x * P, o)) end
      if k == 0 then d = math.max(d, r) end
      if d < P then
        retry_after = (b + k) * P + d - now
        break
      end
    end
  end
end

local reset_after = 0
if newest then
  -- Bucket `newest` stops weighing anything once it is older than b - n, at (newest + n + 1) * P.
  reset_after = (newest + n + 1) * P - now
  if allowed and record then
    redis.call('PEXPIRE', key, math.max(1, ceil_div(reset_after, 1000)))
  end
end
return {allowed and 1 or 0, math.max(0, floor_div(limit * P - usedP, P)), retry_after, reset_after, 0}
