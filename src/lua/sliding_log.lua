-- Sliding log: one sorted-set member per admitted unit, scored by its admission time.
--
-- KEYS[1]  sorted set of one subject: member "<time>:<seq>" (unique even for one microsecond),
--          score = admission time (us)
-- ARGV[1]  now: microseconds since the Unix epoch, or "redis" to read Redis TIME here
-- ARGV[2]  cost: units this request takes (1 <= cost <= limit, checked by the client)
-- ARGV[3]  "1" records an admitted request (consume), "0" only looks (peek)
-- ARGV[4]  limit: units admitted in any window
-- ARGV[5]  window length (us)
-- Returns {allowed 0|1, remaining, retry_after_us, reset_after_us, delay_us = 0}
--
-- Time math. A unit admitted at t counts during [t, t + window): at `now` it has left the window
-- when t <= now - window. Work per decision: the trim removes only units that were admitted (so at
-- most `limit` of them, never a flood: rejected requests add nothing), then O(log n) reads.
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

local cutoff = now - window -- scores <= cutoff have left the window
local live = '(' .. fmt(cutoff)
local used
if record then
  redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(cutoff))
  used = redis.call('ZCARD', key)
else
  used = redis.call('ZCOUNT', key, live, '+inf')
end

local allowed = used + cost <= limit
if allowed and record then
  local seq = used
  for _ = 1, cost do
    -- "<now>:<seq>" is new unless a client with a lagging clock wrote this microsecond already;
    -- NX tells us, and we move on to the next sequence number.
    repeat
      seq = seq + 1
    until redis.call('ZADD', key, 'NX', fmt(now), fmt(now) .. ':' .. fmt(seq)) == 1
  end
  used = used + cost
end

local retry_after = 0
if not allowed then
  -- Room for `cost` appears when the (used + cost - limit)-th oldest live unit leaves the window.
  local nth = used + cost - limit
  local e = redis.call('ZRANGEBYSCORE', key, live, '+inf', 'WITHSCORES', 'LIMIT', nth - 1, 1)
  retry_after = tonumber(e[2]) + window - now
end
local reset_after = 0
if used > 0 then
  local newest = redis.call('ZREVRANGE', key, 0, 0, 'WITHSCORES')
  reset_after = math.max(0, tonumber(newest[2]) + window - now)
  if allowed and record then
    redis.call('PEXPIRE', key, math.max(1, ceil_div(reset_after, 1000)))
  end
end
return {allowed and 1 or 0, limit - used, retry_after, reset_after, 0}
