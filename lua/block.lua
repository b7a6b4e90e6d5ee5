-- Block: deny a subject outright until now + duration, whatever its quota.
--
-- KEYS[1]  the strategy's state: a string state (ARGV[5] "1") holds the block too; any other is
--          untouched (named so the call routes to the subject's slot)
-- KEYS[2]  the block marker: string "blocked until" (us), expiring with the block
-- ARGV[1..3] now, cost (unused), mode "3" (prologue)
-- ARGV[4]  duration of the block (us); "0" lifts the block instead (Strategy::unblock)
-- ARGV[5]  "1" when the strategy keeps a string state (fixed window, token and leaky buckets);
--          missing or anything else: it does not
-- Returns {0, 0, duration, duration, 0}: the decision any request gets during the block. Lifting:
-- {1, 0, 0, 0, 0} when a block was in force, {0, 0, 0, 0, 0} when none was.
--
-- A string state's decisions read the block from the state (helpers.lua, split_block), not the
-- marker: one key read a decision instead of two. The marker is still written for every strategy,
-- for the decisions of the others and of earlier redlimit versions, which read it. A block is
-- never shortened, by either record. The state's key gets a TTL that outlives both the block and
-- the state itself: a fixed window's lives until its window ends, a bucket's until its lease does
-- (helpers.lua, bucket_ttl), and a 0.2 state or a bucket without a lease, which say neither, as
-- long as its key's TTL does (PTTL, read on Redis's clock: such states are gone a window or a
-- refill after an upgrade).
-- Both records are read first, for a block and a lift alike: the marker with GET (a key of another
-- type is no block: epilogue.lua, foreign keys), a string state with MGET, as the batches read
-- states (another type reads as none, and a block replaces it).
local marker = tonumber(redis.pcall('GET', KEYS[2]))
local state, held = false, nil -- the state's own bytes (false: none), the end of the block it holds
if ARGV[5] == '1' then
  state = redis.call('MGET', KEYS[1])[1]
  if state then state, held = split_block(state) end
end
if ARGV[4] == '0' then
  -- Lifted: the marker deleted; a string state's block cut off, its own bytes kept with the key's
  -- TTL (which outlives them: see above), or the key deleted when it held the block alone. A block
  -- that ended and was not yet dropped by a write goes too.
  if marker then redis.call('DEL', KEYS[2]) end
  if held then
    if state then redis.call('SET', KEYS[1], state, 'KEEPTTL') else redis.call('DEL', KEYS[1]) end
  end
  local was = (marker and marker > now) or (held and held > now)
  return {was and 1 or 0, 0, 0, 0, 0}
end
local blocked_until = max(now + tonumber(ARGV[4]), marker or 0, held or 0) -- never shortened
if ARGV[5] == '1' then
  local len = state and #state
  local lives_until = blocked_until
  if len == 20 then
    local start, _, window = unpack_(WINDOW, state)
    lives_until = max(lives_until, start + window)
  elseif len == 28 then
    local _, lease_end = lease_span(unpack_('<I7', state), byte(state, 28))
    lives_until = max(lives_until, lease_end)
  elseif len then
    if not STATE_LEN[len] then state = nil end -- no state: dropped
    local pttl = redis.call('PTTL', KEYS[1])
    if state and pttl > 0 then lives_until = max(lives_until, now + pttl * 1000) end
  end
  redis.call('PSETEX', KEYS[1], ttl_text(ttl_ms(lives_until - now)), (state or '') .. block_suffix(blocked_until))
end
redis.call('PSETEX', KEYS[2], ttl_text(ttl_ms(blocked_until - now)), fmt(blocked_until))
return {0, 0, blocked_until - now, blocked_until - now, 0}
