-- Sliding log: one sorted-set member per admitted unit, scored by its admission time.
--
-- KEYS: two per request (prologue.lua): the state, then the block marker
-- state: sorted set, member "<time>:<seq>" (unique even within one microsecond), score = time (us)
-- ARGV[1..3] now, cost, mode (prologue)
-- ARGV[4]  limit: units admitted in any window
-- ARGV[5]  window length (us)
-- Returns {allowed 0|1, remaining, retry_after_us, reset_after_us, delay_us = 0}
--
-- Time math: a unit admitted at t counts during [t, t + window); at `now` it has left the window
-- when t <= now - window. Work per decision: the trim removes only units that were admitted (at
-- most `limit` of them, never a flood: rejected requests add nothing), then O(log n) reads.
-- A refund removes the newest `cost` units, exact when it follows the request it refunds.
local limit = tonumber(ARGV[4])
local window = tonumber(ARGV[5])
local cutoff = now - window -- scores <= cutoff have left the window
local live = '(' .. fmt(cutoff)
local state_is_string, width = false, 5

local function decide(key, cost)
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
    local stamp = fmt(now)
    for _ = 1, cost do
      -- "<now>:<seq>" is new unless a client with a lagging clock wrote this microsecond already;
      -- NX tells us, and we move on to the next sequence number.
      repeat
        seq = seq + 1
      until redis.call('ZADD', key, 'NX', stamp, stamp .. ':' .. fmt(seq)) == 1
    end
    used = used + cost
  end

  local retry_after = 0
  if not allowed then
    -- Room for `cost` appears when only limit - cost live units are left: when the
    -- (limit - cost + 1)-th newest leaves the window. It is live (used + cost > limit), and one
    -- rank lookup finds it (expired units, still there for a peek, are all older).
    local e = redis.call('ZREVRANGE', key, limit - cost, limit - cost, 'WITHSCORES')
    retry_after = tonumber(e[2]) + window - now
  end
  local reset_after = 0
  if used > 0 then
    local newest = redis.call('ZREVRANGE', key, 0, 0, 'WITHSCORES')
    reset_after = max(0, tonumber(newest[2]) + window - now)
    if allowed and record then redis.call('PEXPIRE', key, ttl_ms(reset_after)) end
  end
  return allowed and 1 or 0, max(0, limit - used), retry_after, reset_after, 0, 1
end
