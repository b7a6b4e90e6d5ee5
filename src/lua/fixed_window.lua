-- Fixed window: counts the units admitted in the clock-aligned window [start, start + window).
--
-- KEYS[1]  hash: s = start of the counted window (us), c = units admitted in it
-- KEYS[2]  block marker (prologue)
-- ARGV[1..3] now, cost, mode (prologue)
-- ARGV[4]  limit: units admitted per window
-- ARGV[5]  window length (us)
-- Returns {allowed 0|1, remaining, retry_after_us, reset_after_us, delay_us = 0}
--
-- Time math: windows are aligned to the epoch, start = now - (now mod window). A stored start
-- ahead of ours (written by a client whose clock runs ahead) wins: we never go back to counting an
-- older window. A refund gives units back to the current window only; those of a window that has
-- ended are gone anyway.
local key = KEYS[1]
local limit = tonumber(ARGV[4])
local window = tonumber(ARGV[5])

local start = now - math.fmod(now, window)
local used = 0
local state = redis.call('HMGET', key, 's', 'c')
local stored = tonumber(state[1])
if stored and stored >= start then
  start = stored
  used = tonumber(state[2]) or 0
end
local window_end = start + window

local allowed = refund or used + cost <= limit
if refund then
  if used > 0 then
    used = math.max(0, used - cost)
    redis.call('HSET', key, 'c', fmt(used))
  end
elseif allowed and record then
  used = used + cost
  redis.call('HSET', key, 's', fmt(start), 'c', fmt(used))
  redis.call('PEXPIRE', key, ttl_ms(window_end - now)) -- the state is worthless once its window ends
end

local retry_after = 0
if not allowed then retry_after = window_end - now end -- the next window starts empty
local reset_after = 0
if used > 0 then reset_after = window_end - now end
return {allowed and 1 or 0, limit - used, retry_after, reset_after, 0}
