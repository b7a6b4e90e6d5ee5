-- Block: deny a subject outright until now + duration, whatever its quota.
--
-- KEYS[1]  the strategy's state: a string state (kind "1"), a policy's hash (kind "2"), a fixed
--          window's hash (kind "3") or a sliding log's sorted set (kind "4") holds the block too
-- KEYS[2]  the block marker: string "blocked until" (us), expiring with the block
-- ARGV[1..2] now; the head: mode "3", cost (unused), then the parameters (prologue.lua)
--          "<duration> <kind>": the block's duration (us), "0" to lift the block instead
--          (Strategy::unblock); kind "1" when the strategy keeps a string state (token and
--          leaky buckets), "2" a policy's hash (sliding window, policies), "3" a fixed window's
--          hash, "4" a sliding log's sorted set; missing or anything else: none (the marker alone)
-- Returns {0, 0, duration, duration, 0}: the decision any request gets during the block. Lifting:
-- {1, 0, 0, 0, 0} when a block was in force, {0, 0, 0, 0, 0} when none was.
--
-- A string state's decisions read the block from the state (helpers.lua, split_block), a hash's
-- from its field BLOCK_FIELD (policy.lua, read), a sorted set's from its member BLOCK_MEMBER
-- (sliding_log.lua, decide), not the marker: one key read a decision instead of two. The marker is
-- still written for every strategy, for the decisions of earlier redlimit versions, which read
-- it. A block is never shortened, by any record. The
-- state's key gets a TTL that outlives both the block and the state itself: a fixed window's lives
-- until its window ends, a bucket's until its lease does (helpers.lua, bucket_ttl), a hash until
-- its newest bucket stops weighing anything (below), and a sorted set, a 0.2 state or a bucket
-- without a lease, which say neither, as long as its key's TTL does (PTTL, read on Redis's clock: a
-- log's TTL is its newest entry's time plus the window, sliding_log.lua; the others are gone a
-- window or a refill after an upgrade).
-- Every record is read first, for a block and a lift alike: the marker with GET (a key of another
-- type is no block: epilogue.lua, foreign keys), a string state with MGET, as the batches read
-- states (another type reads as none, and a block replaces it), a hash with HGETALL, a sorted
-- set's newest member with ZRANGE (another type: no block, and a block deletes the key first, as a
-- decision's write would).
-- A fixed window's hash (kind "3", fixed_window.lua) holds its counts less WINDOW_BLOCKED while a
-- block is in force (helpers.lua): a block takes it off every count, a lift puts it back.

-- A fixed window's hash read whole: its fields and values as HGETALL lists them, and the time its
-- counts stop mattering (the latest window end of its fields "<start>:<window>"). A key of another
-- type is made the hash: a 0.3 packed state's count and block kept (fixed_window.lua), anything
-- else dropped, with the key's TTL for the count (a block sets its own below).
local function window_hash(key)
  local h = rpcall('HGETALL', key)
  if h.err then
    local v = rpcall('GET', key)
    local pttl = rcall('PTTL', key)
    rcall('DEL', key)
    h = {}
    if type_(v) == 'string' then
      local state, b = split_block(v)
      if state and #state == 20 then
        local s, c, w = unpack_(WINDOW, state)
        h = {window_field(s, w), fmt(c)}
      end
      if b then h[#h + 1], h[#h + 2] = BLOCK_FIELD, fmt(b) end
    end
    if #h > 0 then
      rcall('HSET', key, unpack(h))
      rcall('PEXPIRE', key, pttl > 0 and pttl or 1)
    end
  end
  local lives = 0
  for i = 1, #h, 2 do
    local s, w = split_window_field(h[i])
    if s then lives = max(lives, s + w) end
  end
  return h, lives
end
-- When the key's own TTL runs out, on this call's clock: now plus its PTTL (whole ms), or 0 when it
-- has none or less than a millisecond left. What a state that says nothing of its own life (a
-- sorted set, a 0.2 state, a bucket without a lease) lives as long as.
local function ttl_end(key)
  local pttl = rcall('PTTL', key)
  return pttl > 0 and now + pttl * 1000 or 0
end
-- Adds `by` to each count of the hash `h` whose sign `below_zero` names (a block's: the counts not
-- yet blocked, below_zero false; a lift's: the blocked ones, true).
local function shift_counts(key, h, by, below_zero)
  for i = 1, #h, 2 do
    local c = tonumber(h[i + 1])
    if h[i] ~= BLOCK_FIELD and c and (c < 0) == below_zero then rcall('HINCRBY', key, h[i], by) end
  end
end

-- Per call: -------------------------------------------------------------------------------------
if #KEYS ~= 2 or KEYS[1] == KEYS[2] then -- a raw call's: with one key, the state was written, then the marker failed
  error('redlimit: block.lua takes 2 different keys, the state and the block marker; got ' .. #KEYS, 0)
end
local p = words(params) -- helpers.lua; split as the memory twin splits them
local duration, kind = param(p, 1, 0, MAX_WINDOW, 'duration'), p[2] -- as the client sends it (helpers.lua)
local marker = tonumber(rpcall('GET', KEYS[2]))
local state, held = false, nil -- the state's own bytes (false: none), the end of the block it holds
local foreign, lives = false, nil -- a hash's key holds another type; its state's life (below)
local counts -- a fixed window's hash, as window_hash reads it
local member, logged -- a sorted set's block member, when it holds one; whether the key is one (kind "4")
if kind == '3' then
  counts, lives = window_hash(KEYS[1])
  for i = 1, #counts, 2 do
    if counts[i] == BLOCK_FIELD then held = tonumber(counts[i + 1]) end
  end
elseif kind == '1' then
  state = rcall('MGET', KEYS[1])[1]
  if state then state, held = split_block(state) end
elseif kind == '2' then
  -- The hash read whole: its block, and the time its own state stops mattering, `lives`: when its
  -- newest bucket stops weighing anything, (bucket + n + 1) * P with n = window / P (policy.lua,
  -- conclude), the latest over its fields. A field no client wrote (a life past the longest
  -- block and window, 20 years on) is ignored, as a decision ignores it.
  local h = rpcall('HGETALL', KEYS[1])
  if h.err then foreign = true else lives = 0 end
  for i = 1, lives and #h or 0, 2 do
    local f = h[i]
    if f == BLOCK_FIELD then
      held = tonumber(h[i + 1])
    else
      local tag, idx = split_field(f)
      local w, P
      if tag then w, P = parse_tag(tag) end
      if w and P > 0 then
        local t = (idx + floor_div(w, P) + 1) * P
        if t > lives and t - now < 20 * 366 * 86400000000 then lives = t end
      end
    end
  end
elseif kind == '4' then
  -- The block member sits above every entry (scored +inf): the newest member read.
  local top = rpcall('ZRANGE', KEYS[1], '-1', '-1')
  if top.err then
    foreign = true
  elseif top[1] then
    held = block_end(top[1]) -- (helpers.lua: nil for an entry)
    if held then member = top[1] end
    logged = true
  end
end
if duration == 0 then
  -- Lifted: the marker deleted; a string state's block cut off, its own bytes kept with the key's
  -- TTL (which outlives them: see above), or the key deleted when it held the block alone. A block
  -- that ended and was not yet dropped by a write goes too.
  if marker then rcall('DEL', KEYS[2]) end
  if member then
    rcall('ZREM', KEYS[1], member) -- a set left empty is deleted by Redis
  elseif held and kind ~= '1' then
    rcall('HDEL', KEYS[1], BLOCK_FIELD) -- a hash left empty is deleted by Redis
    if kind == '3' then shift_counts(KEYS[1], counts, WINDOW_BLOCKED, true) end
  elseif held then
    if state then rcall('SET', KEYS[1], state, 'KEEPTTL') else rcall('DEL', KEYS[1]) end
  end
  local was = (marker and marker > now) or (held and held > now)
  return {was and 1 or 0, 0, 0, 0, 0}
end
local blocked_until = max(now + duration, marker or 0, held or 0) -- never shortened
if kind == '1' then
  local len = state and #state
  local lives_until = blocked_until
  if len == 28 then
    local _, lease_end = lease_span(unpack_('<I7', state), byte(state, 28))
    lives_until = max(lives_until, lease_end)
  elseif len then
    if not STATE_LEN[len] then state = nil end -- no state: dropped
    local lives = ttl_end(KEYS[1])
    if state then lives_until = max(lives_until, lives) end
  end
  rcall('PSETEX', KEYS[1], ttl_text(ttl_ms(lives_until - now)), (state or '') .. block_suffix(blocked_until))
elseif kind == '2' or kind == '3' then
  if foreign then rcall('DEL', KEYS[1]) end
  if kind == '3' then shift_counts(KEYS[1], counts, -WINDOW_BLOCKED, false) end
  rcall('HSET', KEYS[1], BLOCK_FIELD, fmt(blocked_until))
  rcall('PEXPIRE', KEYS[1], ttl_text(ttl_ms(max(blocked_until, lives or 0) - now)))
elseif kind == '4' then
  if foreign then rcall('DEL', KEYS[1]) end
  local lives_until = blocked_until -- the log's entries live as long as its key
  if logged then lives_until = max(lives_until, ttl_end(KEYS[1])) end
  local new = BLOCK_MEMBER .. fmt(blocked_until)
  if member and member ~= new then rcall('ZREM', KEYS[1], member) end
  rcall('ZADD', KEYS[1], '+inf', new)
  rcall('PEXPIRE', KEYS[1], ttl_text(ttl_ms(lives_until - now)))
end
rcall('PSETEX', KEYS[2], ttl_text(ttl_ms(blocked_until - now)), fmt(blocked_until))
return {0, 0, blocked_until - now, blocked_until - now, 0}
