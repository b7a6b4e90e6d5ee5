-- Sliding log: one sorted-set member per admitted unit, scored by its admission time.
--
-- KEYS[1]  sorted set: member "<time>:<seq>" (unique even within one microsecond), score = time (us)
-- KEYS[2]  block marker (prologue)
-- ARGV[1..3] now, cost, mode (prologue)
-- ARGV[4]  limit: units admitted in any window
-- ARGV[5]  window length (us)
-- Returns {allowed 0|1, remaining, retry_after_us, reset_after_us, delay_us = 0}
--
-- Time math: a unit admitted at t counts during [t, t + window); at `now` it has left the window
-- when t <= now - window. Work per decision: the trim removes only units that were admitted (at
-- most `limit` of them, never a flood: rejected requests add nothing), then O(log n) reads.
-- A refund removes the newest `cost` units, exact when it follows the request it refunds.
local key = KEYS[1]
local limit = tonumber(ARGV[4])
local window = tonumber(ARGV[5])

local cutoff = now - window -- scores <= cutoff have left the window
local live = '(' .. fmt(cutoff)
local used
if record or refund then
  redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(cutoff))
  if refund then redis.call('ZPOPMAX', key, cost) end
  used = redis.call('ZCARD', key)
else
  used = redis.call('ZCOUNT', key, live, '+inf')
end

local allowed = refund or used + cost <= limit
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
  if allowed and record then redis.call('PEXPIRE', key, ttl_ms(reset_after)) end
end
return {allowed and 1 or 0, limit - used, retry_after, reset_after, 0}
