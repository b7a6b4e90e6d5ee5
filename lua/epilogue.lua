-- Epilogue: appended at build time to every script in this folder that defines decide()
-- (cmake/embed_lua.cmake). Runs the call's n requests through decide(), in order, and returns their
-- decisions. What the script sets before this:
--   decide(key, cost, value) -> allowed, remaining, retry_after, reset_after, delay, deciding
--       limit, new value, ttl_ms, each, packed: judges one request (as values, not a table: a
--       batch makes no garbage per request). A string state gets its current value (nil when missing) and
--       returns what to write: a new value with its TTL (0: the key's TTL still holds, keep it),
--       false to delete the key, nil to leave it;
--       other states read and write their own keys. `each` (policies only): every limit's own
--       remaining and reset_after, one pair a limit; `packed` (policies only, a call of one
--       request): the admission as the one integer that is its reply (policy.lua, packable), or nil.
--   state_is_string: whether the state is such a string;
--   width: the length of a decision (5, or 6 + 2m for a policy of m > 1 limits: the deciding
--       limit, then `each`).
-- The functions below are its load part (cmake/embed_lua.cmake): they follow the script's own.

-- What a block says of each limit of a policy: nothing left, until the block ends.
local function blocked_each(wait)
  local each = {}
  for i = 1, width - 6, 2 do
    each[i] = 0
    each[i + 1] = wait
  end
  return each
end

-- A batch's reply: one table kept from call to call and filled again (a nil after the last
-- decision ends the reply Redis reads from it), where a new one would be grown through every power
-- of two up to n * width, and then collected: 5-8% of a batch's time in Redis (measured on 7.0).
-- Redis converts the returned table before the next call can run, and nothing else keeps it.
local batch_out = {}

-- A decision as the reply's integers, appended to `out` from position m + 1. One by one, in
-- order: a multiple assignment stores right to left, and keys past the end of the array part land
-- in the hash part, to be moved at the next resize.
local function put(out, m, a, rem, retry, reset, delay, decider, each)
  out[m + 1] = a
  out[m + 2] = rem
  out[m + 3] = retry
  out[m + 4] = reset
  out[m + 5] = delay
  if width > 5 then
    out[m + 6] = decider
    for i = 1, width - 6 do out[m + 6 + i] = each[i] end
  end
end

-- The reply's integers. Redis converts each one it is returned (about 440 instructions apiece,
-- callgrind on 7.0: a tenth of a batched decision's), so an admission that waits for nothing (retry
-- and delay 0), the common case, goes short; the client reads the forms back
-- (detail::decode_decision, decode_decisions):
-- - one request's reply: for such an admission one integer, reset_after * (L + 1) + remaining,
--   where L is the strategy's limit (`most_cost`, the client's Decision::limit), when that is below
--   2^53 (a Lua number holds it exactly); else {remaining, reset_after}; else its five integers
--   {allowed, remaining, retry_after, reset_after, delay}. Redis returns a number as it is, where
--   a table costs it ~4,000 instructions to convert (its fields 'err', 'ok' and the rest looked up,
--   then each element): a tenth of a token bucket's single decision (callgrind on 7.0);
-- - a batch's, decision after decision: for such an admission one negative integer, -1 - 2 *
--   remaining when its reset_after is the previous decision's (a fixed window's, or a sliding
--   window's, is the same for every subject of a call), else -2 - 2 * (reset_after * (L + 1) +
--   remaining) when that product is below 2^52 (the odd and the even numbers apart, both exact);
--   else {3, remaining, reset_after}; any other decision its five integers, whose first (allowed) is
--   0 or 1. One integer where {2, remaining} and {3, remaining, reset_after} were two and three: 2-3%
--   of a batched decision's instructions (callgrind on 7.0, consume_many 128: token bucket 24,998 to
--   24,357, fixed window 10,667 to 10,448);
-- - a policy's decision of m > 1 limits (width 6 + 2m): such an admission is its limits' pairs
--   alone, {remaining_1, reset_after_1, ..., remaining_m, reset_after_m} (in a batch after a 2),
--   from which the client takes the decision's own (the least remaining, the latest reset, the
--   first limit with the least left: parts/policy_writes.lua, conclude); any other decision
--   comes whole. Alone in its call, such an admission is one integer instead when decide() packs
--   it (policy.lua, packable: the limits' remaining, their resets left for the client to work
--   out).
-- One request's reply goes in a table kept from call to call (one_out; a policy's admission in
-- its `each`, kept by policy.lua), as batch_out above; another policy decision in a table built
-- whole, at its size (put() grows one from empty, which a batch's reply amortises and a single
-- decision would not). reply() answers every request but the common one, an admission of width 5,
-- whose integer (or {remaining, reset_after} in one_out) the single path below returns itself: a
-- Lua call costs Redis about as much as the work around it (helpers.lua, TWO52).
local one_out = {0, 0, 0, 0, 0}
local function reply(a, rem, retry, reset, delay, decider, each)
  if width == 5 then
    one_out[1] = a
    one_out[2] = rem
    one_out[3] = retry
    one_out[4] = reset
    one_out[5] = delay
    return one_out
  end
  if a == 1 and retry == 0 and delay == 0 and width > 6 then
    each[width - 5] = nil -- the reply ends after the m pairs (the table may have held more)
    return each
  end
  local out = {a, rem, retry, reset, delay, decider}
  for i = 1, width - 6 do out[6 + i] = each[i] end
  return out
end

-- Writing what decide() returned for a string state: a value with its TTL in ms (0: the key's TTL
-- still holds), or false to delete the key. The single path and the batch loop below make the
-- common writes themselves, without a Lua call: a value with a TTL, PSETEX; a value that keeps the
-- TTL, SETRANGE over the key when it is of the length the key holds (`len`: read by this call, or
-- written by it earlier), or when decide() wrote the state's head alone (in_place, helpers.lua).
-- SETRANGE keeps the TTL too, and costs Redis a third less than SET ... KEEPTTL inside a script
-- (0.32 against 0.49 us, measured on 7.0): an integer reply where SET's status reply becomes a Lua
-- table. Otherwise the lengths must match, or SETRANGE would leave the old value's tail (a block
-- that ended) behind: such a value, and a delete, go through rare_write. A TTL of 0 is only ever
-- returned for a key this call read or wrote, so no command creates a key without a TTL.
local function rare_write(key, new)
  if new then rcall('SET', key, new, 'KEEPTTL') else rcall('DEL', key) end
end

-- A string state's value as split_block (helpers.lua) reads it; the end of the block it holds (nil
-- when it has none, or one that has ended, which the next write then drops); and the wait that
-- block imposes now (nil for a refund, which goes through).
local function unblock(v)
  local state, blocked_until = split_block(v)
  if not blocked_until or blocked_until <= now then return state, nil, nil end
  return state, blocked_until, not refund and blocked_until - now or nil
end

-- Foreign keys. A key of another type under one of redlimit's names (a program that wrote there:
-- the names are redlimit's, docs/keys.md) reads as no state, and the next write replaces it: a
-- string state's SET overwrites any type, and sliding_log.lua and policy.lua delete such a key
-- before they write. Reads that Redis would fail with WRONGTYPE go through redis.pcall, whose
-- error comes back as a table with `err`, whose length (#) is 0: a single decision's GET takes a
-- value of length 0 for no state, where asking a string for `err` goes through its metatable;
-- MGET, which batches read with, answers nil for such a key anyway. So no request fails for what
-- another program left under its key, and no request of a batch, or of a script call shared by
-- many callers (the sync and async lanes), fails for another's.

-- A blocked request's reset_after: the later of the block's end (`wait` from now) and the state's
-- own, which the subject's quota counted before the block may outlast. A peek of the state under
-- the block tells it (decide() with record off writes nothing; `v`, the state without its block).
-- The other states hold their block where their decide() reads it, and answer for it there.
local function blocked_reset(key, cost, v, wait)
  local saved = record
  record = false
  local _, _, _, reset = decide(key, cost, v)
  record = saved
  if reset > wait then return reset end
  return wait
end

-- Per call: -------------------------------------------------------------------------------------
local n = #KEYS -- one key a request: its state, which holds its block (prologue.lua)
if cost1 > most_cost then cost_above(cost1, most_cost) end -- (helpers.lua)
if n == 1 then
  -- One request: one read (a string state holds its own block: helpers.lua, split_block), at most
  -- one write.
  local value, wait, blocked_until, len = nil, nil, nil, nil
  if state_is_string then
    value = rpcall('GET', KEYS[1]) -- foreign keys: see above
    len = value and #value
    in_place = true -- (helpers.lua)
    if len == 0 then -- pcall's error table (#: 0), or an empty string: no state either way
      value, len = nil, nil
    elseif value and BLOCKED[len] then
      value, blocked_until, wait = unblock(value)
      in_place = false -- the key holds a block after the state
    end
  end
  if wait then
    return reply(0, 0, wait, blocked_reset(KEYS[1], cost1, value, wait), 0, 1, width > 5 and blocked_each(wait))
  end
  local a, rem, retry, reset, delay, decider, new, ttl, each, packed = decide(KEYS[1], cost1, value)
  if blocked_until and new ~= nil then new, ttl = keep_block(new, ttl, blocked_until) end
  -- The common writes without a call (rare_write, above; as in the batch loop below)
  if ttl == 0 and (len == #new or in_place) then
    rcall('SETRANGE', KEYS[1], '0', new)
  elseif new and ttl ~= 0 then -- a new state's write, or a new lease's
    rcall('PSETEX', KEYS[1], ttl_text(ttl), new)
  elseif new ~= nil then
    rare_write(KEYS[1], new)
  end
  if packed then return packed end -- a policy's admission, one integer (policy.lua, packable)
  if a == 1 and retry == 0 and delay == 0 and width == 5 then -- the short forms (reply, above)
    if rem >= 0 and rem <= most_cost then
      -- exact below 2^53; a product past it rounds to 2^53 or more, never below (IEEE rounding is
      -- monotonic), so the test cannot pass a rounded figure
      local packed = reset * (most_cost + 1) + rem
      if packed < TWO53 then return packed end
    end
    one_out[1] = rem
    one_out[2] = reset
    one_out[3] = nil -- the reply ends here
    return one_out
  end
  return reply(a, rem, retry, reset, delay, decider, each)
end

-- A batch. One MGET reads every request's string state (which holds its own block), whatever n
-- is (a hash and a sorted set hold their block too, and their decide() reads them: no MGET, unless
-- the call is spread, below). Its
-- reply is read by position (request i's at i), and each admission is written as it is decided and kept in `written`, so a
-- later request of the same subject reads the value the earlier one wrote, and a TTL 0 (keep the
-- key's) always finds the key in Redis. Filing every key read in a table by name instead costs two
-- table inserts a request; writing once per key at the end (its last value) saves the writes of a
-- subject repeated in a batch, but its bookkeeping (three tables keyed by the keys, grown and
-- rehashed as they fill) cost more than half a microsecond of Redis's time per request of every
-- batch (measured on 7.0).
-- A spread call (requests of many slots, helpers.lua) reads each request's key with a command of
-- its own: one command may not span slots, even in a script allowed to. A string state's is an
-- MGET of its key; a hash's or a sorted set's the first read its decide() makes (`prefetch`, set by
-- policy.lua and sliding_log.lua: helpers.lua, first_read), handed to decide() as its `v` for the
-- key's first request (a later one of the same key reads what the earlier wrote), where an MGET
-- that answered nil for such a key was a command a decision more (a sliding window's decision
-- in a cluster: HGETALL, HSET and that MGET). A request's keys share its slot (one hash tag), so
-- either way every slot of the call is read before anything is written, and a key this node does
-- not serve (a slot that moved, or is moving: Redis refuses the command, and the call ends in
-- error) stops the call before it changed anything, and the client can send its requests again
-- slot by slot.
-- A raw call that sends no key decides nothing.
if n < 1 then error('redlimit: no key, where each request sends its state', 0) end
local got, fetched = {}, nil
if spread then
  if prefetch then
    for i = 1, n do got[i] = prefetch(KEYS[i]) end
    fetched = {} -- the keys whose read a decision took (below)
  else
    for i = 1, n do got[i] = rcall('MGET', KEYS[i])[1] end
  end
elseif state_is_string then
  got = rcall('MGET', unpack(KEYS))
end
local written = {}
local distinct = mode == '4' -- no key repeats: no value this call wrote is read again (prologue.lua)

-- A rejected request records nothing, so until that subject admits something again, the same
-- request gets the same answer: `rejected[key][cost]` remembers it, and a flood from one subject
-- inside a batch costs a table lookup a request.
local out, m, rejected = batch_out, 0, {}
local last_reset -- the previous decision's reset_after (reply, above)
-- Every cost is read before anything is written: a call with a cost that is not a number, or is
-- above the limit (a raw FCALL; the client checks its own), fails whole, as it does when the first
-- request's is bad. false: every request costs cost1.
local first_cost = later_costs(ARGV, n, most_cost) -- (helpers.lua)
for i = 1, n do
  local key = KEYS[i]
  local cost = cost1
  if first_cost and i > 1 then cost = tonumber(ARGV[first_cost + i]) end
  local seen = rejected[key]
  local memo = seen and seen[cost]
  local a, rem, retry, reset, delay, decider, each
  if memo then
    a, rem, retry, reset, delay, decider, each = 0, memo[1], memo[2], memo[3], memo[4], memo[5], memo[6]
  else
    local v, wait, blocked_until, len = nil, nil, nil, nil
    if state_is_string then
      if distinct then
        v = got[i] or nil -- MGET's false: no state
      else
        v = written[key] -- false: deleted by this call
        if v == nil then v = got[i] end
        v = v or nil -- MGET's and the delete's false: no state
      end
      len = v and #v
      in_place = distinct -- (helpers.lua: a key that comes again reads `written`, which must be whole)
      if v and BLOCKED[len] then
        v, blocked_until, wait = unblock(v)
        in_place = false
      end
    elseif fetched then -- a spread call's prefetched read, for the key's first request only
      if distinct then
        v = got[i]
      elseif not fetched[key] then
        v, fetched[key] = got[i], true
      end
    end
    if wait then
      a, rem, retry, reset, delay, decider = 0, 0, wait, blocked_reset(key, cost, v, wait), 0, 1
      if width > 5 then each = blocked_each(wait) end
    else
      local new, ttl
      a, rem, retry, reset, delay, decider, new, ttl, each = decide(key, cost, v)
      if blocked_until and new ~= nil then new, ttl = keep_block(new, ttl, blocked_until) end
      if new ~= nil then
        -- The common writes without a call (rare_write, above): a Lua call costs Redis about as
        -- much as the work around it here (helpers.lua, TWO52)
        if ttl == 0 and (len == #new or in_place) then
          rcall('SETRANGE', key, '0', new)
        elseif new and ttl ~= 0 then
          rcall('PSETEX', key, ttl_text(ttl), new)
        else
          rare_write(key, new)
        end
        if state_is_string and not distinct then written[key] = new end
      end
    end
    if a == 0 and not distinct then -- (distinct: no key comes again, nothing to remember)
      if not seen then
        seen = {}
        rejected[key] = seen
      end
      seen[cost] = {rem, retry, reset, delay, decider, width > 5 and {unpack(each, 1, width - 6)}}
    elseif seen then
      rejected[key] = nil
    end
  end
  local short = a == 1 and retry == 0 and delay == 0 -- an admission that waits for nothing (reply, above)
  if width > 5 then
    if short and width > 6 then -- a policy's: 2, then its limits' pairs
      out[m + 1] = 2
      for i = 1, width - 6 do out[m + 1 + i] = each[i] end
      m = m + width - 5
    else
      put(out, m, a, rem, retry, reset, delay, decider, each)
      m = m + width
    end
  elseif short then
-- Part: parts/batch_admission.lua
  else -- put()'s first five, without the call
    out[m + 1] = a
    out[m + 2] = rem
    out[m + 3] = retry
    out[m + 4] = reset
    out[m + 5] = delay
    m = m + 5
  end
  last_reset = reset
end
out[m + 1] = nil
return out
