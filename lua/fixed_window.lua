-- Fixed window: counts the units admitted in the clock-aligned window [start, start + window).
-- Runs its own requests: no epilogue (see "Why a count Redis keeps" below).
--
-- KEYS[i]  request i's state, a hash (below), which holds its block (prologue.lua)
-- ARGV[1..2] now; the head: mode, cost, then the parameters (prologue.lua; helpers.lua, params)
--          "<limit> <window>": the units admitted per window and the window's length (us)
-- ARGV[3..] the costs of a batch's later requests (prologue.lua)
-- Returns the epilogue's reply forms (epilogue.lua, reply): one request's reset_after * (limit + 1)
-- + remaining (below 2^53) or {remaining, reset_after} for an admission, else {allowed, remaining,
-- retry_after, reset_after, 0}; a batch's decisions one after the other, an admission as one
-- negative integer or {3, remaining, reset_after}, else the five integers (epilogue.lua, reply).
--
-- The state: a hash. Field "<start>:<window>" (decimal us) counts the units admitted in the window
-- of that length starting at <start>; BLOCK_FIELD holds the end of a block (block.lua), and while
-- the block is in force every count is stored less WINDOW_BLOCKED (helpers.lua), below zero.
-- Why a count Redis keeps: a decision is one HINCRBY of the current window's field, whose reply is
-- the count with this request in it, where a packed state costs a read, an unpack, a pack and a
-- write: 21,000-22,000 instructions of Redis a decision against 34,500 (callgrind, Redis 7.0.15;
-- docs/performance.md). A request the count does not admit is taken back with a second HINCRBY.
-- Everything else is paid once a window: the window's first request (HINCRBY answers its cost)
-- sets the key's TTL with PEXPIRE NX, which also says whether the key is new; a key that was not
-- new holds another window's field, or a block, and is settled (below): read whole, every field
-- but the current window's deleted, and its TTL set to the window's end. A count below zero is a
-- block (WINDOW_BLOCKED), settled too.
--
-- Time math: windows are aligned to the epoch, start = now - (now mod window). A stored start
-- ahead of ours (written by a client whose clock runs ahead) wins: we never go back to counting an
-- older window. A refund gives units back to the current window only; those of a window that has
-- ended are gone anyway. The state is worthless once its window ends (and its block, if any): that
-- is its TTL (helpers.lua, ttl_ms), set when the window's first request settles the key.
-- Reconfiguration: a changed limit keeps what was consumed (remaining is clamped at 0). A count
-- written under another window length counts in the current window when the two windows overlap
-- (what was consumed stays consumed), and moves to the current window's field. A state of redlimit
-- 0.3 or earlier (a packed string, helpers.lua) is read the same way, and replaced by the hash.
local limit, window, current -- this call's: limit, window length (us), start of the current window
local params_arg -- the string limit and window were parsed from (helpers.lua, params)
local most_cost -- the limit, by the name the batch reply's part reads (parts/batch_admission.lua)
local field, field_start, field_window -- the current window's field, and the start and window it names

-- The fields of a hash (HGETALL's reply `h`) as a settle reads them: the block's end (nil: none),
-- and the count fields, each as {start, window, count, name, stored}: the count with any block's
-- WINDOW_BLOCKED added back, and the number the field holds. A field of any other name, or count,
-- is nobody's (a foreign write): listed with a nil start, to be deleted.
local function fields_of(h)
  local blocked_until, counts = nil, {}
  for i = 1, #h, 2 do
    local f, v = h[i], h[i + 1]
    if f == BLOCK_FIELD then
      blocked_until = tonumber(v)
    else
      local s, w = split_window_field(f)
      local stored = tonumber(v)
      local c = stored
      if c and c < 0 then c = c + WINDOW_BLOCKED end
      counts[#counts + 1] = {c and s, w, c, f, stored}
    end
  end
  return blocked_until, counts
end

-- A key of another type: a 0.3 (or earlier) packed string state is read as the hash it becomes
-- (helpers.lua, split_block and unpack_window); anything else as no state.
local function legacy(key)
  local v = rpcall('GET', key)
  if type_(v) ~= 'string' then return nil, {} end
  local state, blocked_until = split_block(v)
  local s, c, w
  if state then s, c, w = unpack_window(state, window) end
  if not s then return blocked_until, {} end
  return blocked_until, {{s, w, c, nil}}
end

-- Settles a request off the steady path: the window's first, a block's, a refund, a peek, or a key
-- of another type. `bumped`: the count HINCRBY answered when this request is already in the current
-- window's field (a consume), a table when HINCRBY failed (another type), nil when nothing was
-- added. Reads the key whole, decides as the count says, and (unless a peek) writes the hash back:
-- one count field (the current window's, or a later one's: see Time math), the block while it is
-- in force, and a TTL to the end of both. Returns allowed, remaining, retry_after, reset_after.
local function settle(key, cost, bumped)
  local h = rpcall('HGETALL', key)
  local foreign = h.err ~= nil -- another type: replaced by the hash on a write
  local blocked_until, counts
  if foreign then blocked_until, counts = legacy(key) else blocked_until, counts = fields_of(h) end
  local bumped_here = type_(bumped) == 'number'
  -- The count that wins (the latest start of our window length, at or after ours), what
  -- overlapping windows of other lengths carry, and the stored fields that go.
  local home, start, used, carried = nil, current, 0, 0
  for i = 1, #counts do
    local s, w, c = counts[i][1], counts[i][2], counts[i][3]
    if s and w == window and s >= start and (home == nil or s > start) then
      home, start, used = counts[i], s, c
    elseif s and w ~= window and s < current + window and s + w > current then
      carried = carried + c
    end
  end
  if home and home[4] == field and bumped_here then used = used - cost end -- this request's, added
  if not home or start == current then used = used + carried end
  local window_end = start + window
  local wait = blocked_until and blocked_until > now and blocked_until - now
  local a, retry = 1, 0
  if wait and not refund then
    a, retry = 0, wait
  elseif refund then
    used = max(0, used - cost)
  elseif used + cost <= limit then
    if record then used = used + cost end
  else
    a, retry = 0, window_end - now
  end
  if record or refund then
    -- The hash as it should stand: the winning count (less WINDOW_BLOCKED during a block), the
    -- block while in force, nothing else.
    local name = home and home[4] -- nil for a 0.3 state's: its window's field is written anew
    if not name then name = start == current and field or window_field(start, window) end
    if foreign then rcall('DEL', key) end
    local stale = {}
    for i = 1, #counts do
      local f = counts[i][4]
      if f and f ~= name then stale[#stale + 1] = f end
    end
    if bumped_here and name ~= field then stale[#stale + 1] = field end
    if blocked_until and not wait and not foreign then stale[#stale + 1] = BLOCK_FIELD end
    local counted_any = used > 0 or wait -- else the hash goes when it is left empty
    if not counted_any and not foreign and (home or bumped_here) then stale[#stale + 1] = name end
    if #stale > 0 then rcall('HDEL', key, unpack(stale)) end
    local target = wait and used - WINDOW_BLOCKED or used
    if counted_any and not (home and home[4] == name and home[5] == target) then
      rcall('HSET', key, name, fmt(target))
    end
    if wait and foreign then rcall('HSET', key, BLOCK_FIELD, fmt(blocked_until)) end
    -- The key's TTL already covers a count that was stored before this call (set with it: see the
    -- top; block.lua outlives its block), as every write of a window keeps it; a count this call
    -- starts (HINCRBY answered its cost), or moves, sets its own.
    local ttl_holds = home and not foreign and not (bumped_here and home[4] == field and home[3] == cost)
    if counted_any and not ttl_holds then
      rcall('PEXPIRE', key, ttl_text(ttl_ms(max(window_end, wait and blocked_until or 0) - now)))
    end
  end
  local remaining = limit - used
  if remaining < 0 or wait and not refund then remaining = 0 end
  local reset = used > 0 and window_end - now or 0
  if wait and not refund and wait > reset then reset = wait end -- (the later of the block's end and the window's)
  return a, remaining, retry, reset
end

-- A request after its HINCRBY (`used`: the count it answered): the steady path (see the top), or
-- settle() off it. Returns allowed, remaining, retry_after, reset_after.
local window_end_now -- the current window's end less now: every steady decision's reset_after
local function counted(key, cost, used)
  if type_(used) ~= 'number' or used <= cost then
    -- The window's first request on a new key: the TTL, and nothing more to look at.
    if used == cost and pexpire_nx(key, ttl_text(ttl_ms(window_end_now))) == 1 then
      if cost <= limit then return 1, limit - cost, 0, window_end_now end
      rcall('DEL', key) -- the key held this request alone
      return 0, limit, window_end_now, 0
    end
    return settle(key, cost, used)
  end
  if used <= limit then return 1, limit - used, 0, window_end_now end
  rcall('HINCRBY', key, field, -cost) -- not admitted: taken back
  return 0, max(0, limit - used + cost), window_end_now, window_end_now
end

-- A batch's reply: one table kept from call to call (epilogue.lua, batch_out).
local batch_out = {}
local one_out = {0, 0, 0, 0, 0}

-- Per call: -------------------------------------------------------------------------------------
if params ~= params_arg then
  local p = words(params) -- checked (helpers.lua, param), then kept: params_arg is set last
  param_words(p, 2, 'a fixed window')
  limit, window = param(p, 1, 1, MAX_COUNT, 'limit'), param(p, 2, 1, MAX_WINDOW, 'window')
  most_cost = limit
  params_arg = params
end
-- now mod window inline, as helpers.lua's TWO52 note divides: Lua's % may come out short by a
-- window, which the test puts back; a call into C (fmod) costs Redis more than the three steps.
local r = now % window
if r < 0 then r = r + window end
current = now - r
window_end_now = window - r
if current ~= field_start or window ~= field_window then
  field, field_start, field_window = window_field(current, window), current, window
end

local n = #KEYS
if cost1 > limit then cost_above(cost1, limit) end -- (helpers.lua)
if n == 1 then
  local a, rem, retry, reset
  if record then
    -- counted()'s steady path inline: a Lua call costs Redis about as much as the work around it
    local used = rpcall('HINCRBY', KEYS[1], field, cost1_arg)
    if type_(used) == 'number' and used > cost1 and used <= limit then
      -- (epilogue.lua, reply) both terms exact, so the sum rounds only at 2^53 or past it; (P +
      -- limit) - used could round past 2^53 and come back below it off by one
      local packed = window_end_now * (limit + 1) + (limit - used)
      if packed < TWO53 then return packed end
      one_out[1] = limit - used
      one_out[2] = window_end_now
      one_out[3] = nil -- the reply ends here
      return one_out
    end
    a, rem, retry, reset = counted(KEYS[1], cost1, used)
  else
    a, rem, retry, reset = settle(KEYS[1], cost1, nil)
  end
  if a == 1 and retry == 0 then
    if rem >= 0 and rem <= limit then
      local packed = reset * (limit + 1) + rem -- (epilogue.lua, reply)
      if packed < TWO53 then return packed end
    end
    one_out[1] = rem
    one_out[2] = reset
    one_out[3] = nil
    return one_out
  end
  one_out[1], one_out[2], one_out[3], one_out[4], one_out[5] = a, rem, retry, reset, 0
  return one_out
end

-- A batch: counted() or settle() a request at a time, in order, so a subject's later request sees
-- its earlier ones. A spread call (requests of many slots, helpers.lua) first touches every key: a
-- key this node does not serve (a slot that moved, or is moving) stops the call before anything
-- was written, and the client sends its requests again slot by slot.
if n == 0 then error('redlimit: fixed_window.lua takes 1 key a request, got none', 0) end -- a raw call's
if spread then
  for i = 1, n do rcall('EXISTS', KEYS[i]) end
end
local first_cost = later_costs(ARGV, n, limit) -- false: every request costs cost1 (helpers.lua)
-- A rejection changes no count, so the same request of the same subject gets the same answer until
-- that subject admits something: the last rejection is remembered, and a flood from one subject
-- inside a batch costs a comparison a request instead of two HINCRBYs.
local out, m, last_reset = batch_out, 0, nil
local rejected_key, rejected_cost, rejected_rem, rejected_retry, rejected_reset
for i = 1, n do
  local key, cost = KEYS[i], cost1
  if first_cost and i > 1 then cost = tonumber(ARGV[first_cost + i]) end
  local a, rem, retry, reset
  if key == rejected_key and cost == rejected_cost then
    a, rem, retry, reset = 0, rejected_rem, rejected_retry, rejected_reset
  else
    if record then
      a, rem, retry, reset = counted(key, cost, rpcall('HINCRBY', key, field, cost == cost1 and cost1_arg or cost))
    else
      a, rem, retry, reset = settle(key, cost, nil)
    end
    if a == 0 then
      rejected_key, rejected_cost, rejected_rem, rejected_retry, rejected_reset = key, cost, rem, retry, reset
    elseif key == rejected_key then
      rejected_key = nil
    end
  end
  -- The epilogue's reply forms (epilogue.lua, reply), written inline as the epilogue's loop writes
  -- them (an admission: the part's text): a Lua call per decision costs Redis about as much as the
  -- work around it (helpers.lua, TWO52).
  if a == 1 and retry == 0 then
-- Part: parts/batch_admission.lua
  else
    out[m + 1] = a
    out[m + 2] = rem
    out[m + 3] = retry
    out[m + 4] = reset
    out[m + 5] = 0
    m = m + 5
  end
  last_reset = reset
end
out[m + 1] = nil
return out
