-- Fixed window: counts the units admitted in the clock-aligned window [start, start + window).
--
-- KEYS[1]  hash of one subject: s = start of the counted window (us), c = units admitted in it
-- ARGV[1]  now: microseconds since the Unix epoch, or "redis" to read Redis TIME here
-- ARGV[2]  cost: units this request takes (1 <= cost <= limit, checked by the client)
-- ARGV[3]  "1" records an admitted request (consume), "0" only looks (peek)
-- ARGV[4]  limit: units admitted per window
-- ARGV[5]  window length (us)
-- Returns {allowed 0|1, remaining, retry_after_us, reset_after_us, delay_us = 0}
--
-- Time math. Every number is an integer number of microseconds held in a Lua double: exact below
-- 2^53 (timestamps until 2255), and math.fmod is exact on such integers. Windows are aligned to the
-- epoch: start = now - (now mod window). A stored start ahead of ours (written by a client whose
-- clock runs ahead) wins: we never go back to counting an older window.
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

local function fmt(x) return string.format('%.0f', x) end
local function ceil_div(a, b)
  local r = math.fmod(a, b)
  return (a - r) / b + ((r > 0) and 1 or 0)
end

local start = now - math.fmod(now, window)
local used = 0
local state = redis.call('HMGET', key, 's', 'c')
local stored = tonumber(state[1])
if stored and stored >= start then
  start = stored
  used = tonumber(state[2]) or 0
end
local window_end = start + window

local allowed = used + cost <= limit
if allowed and record then
  used = used + cost
  redis.call('HSET', key, 's', fmt(start), 'c', fmt(used))
  -- The key lives until its window closes; at least 1 ms.
  redis.call('PEXPIRE', key, math.max(1, ceil_div(window_end - now, 1000)))
end

local retry_after = 0
if not allowed then retry_after = window_end - now end -- the next window starts empty
local reset_after = 0
if used > 0 then reset_after = window_end - now end
return {allowed and 1 or 0, limit - used, retry_after, reset_after, 0}
