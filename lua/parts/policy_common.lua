-- The policy script's common paths (lua/policy.lua includes this part where its line "-- Part:"
-- names it: cmake/embed_lua.cmake): decide_window, fresh and decide_policy, which decide what
-- general() would for the commonest hashes, in fewer Lua operations. Apart so that policy.lua
-- stays the state, the general decision and the per-call part; these use its locals (limits,
-- each_out, fields, count_of, text_of, parse_field, weighted, general...), as one text.
--
-- The common path: general() (policy.lua) for a hash that holds nothing but the limits' buckets
-- up to `high` (per limit, set per call: b + 1, one ahead of the current one), of which at most
-- STALE_MAX are stale (older than `oldest`: an admission deletes them in one HDEL, whose arguments
-- unpack() puts on Lua's stack), and a consume or a peek they admit. A subject back after a while
-- (a minute later, its second-long limit's bucket is 60 intervals stale) takes it too. Anything
-- else (more stale buckets, one past b + 1, another tag's, or a block, which the next admission
-- settles; a key of another type) goes to general() with the hash read, which decides it the
-- same way. A rejection goes from the loop that read the buckets straight to conclude() (whose
-- wait walks them), as general() would after reading them again. A field's tag and bucket come from
-- parse_field's names (policy.lua), which every subject shares. general() makes about 290 Lua
-- operations a sliding window's decision and 690 a policy of three limits' (counted with a line
-- hook in lua5.1), a third of their Redis time (callgrind on 7.0); these take 170 and 500, and a
-- policy's new subject 280 (fresh).
local STALE_MAX = 64
local stale_names = {} -- the stale buckets a common path deletes, kept from call to call

-- A sliding window's (a policy of one limit): its figures in locals, and no loop over limits.
-- Its two commonest hashes, a subject's current bucket alone or with the one before it (`prev`,
-- set per call in policy.lua: the weighted one when n = 1), are read by name, without the loop: that loop
-- and its bookkeeping were a tenth of a batched decision's instructions (callgrind on 7.0). They
-- decide what the loop would: nothing stale, the newest bucket b (so the TTL holds), and the same
-- counts, or general() for a rejection.
-- `v` (both paths): the hash's HGETALL, when a spread call read it before deciding (policy.lua,
-- prefetch).
local function decide_window(key, cost, v)
  local h = v or rpcall('HGETALL', key)
  local l = limits[1]
  local len, c, o = #h, nil, nil -- (an error table's # is 0: epilogue.lua, foreign keys)
  if len == 2 then
    if h[1] == l.field then c = h[2] end
  elseif len == 4 then
    if h[1] == l.field then
      if h[3] == l.prev then c, o = h[2], h[4] end
    elseif h[3] == l.field and h[1] == l.prev then
      c, o = h[4], h[2]
    end
  end
  c = c and (count_of[c] or parse_count(c))
  if c then
    local used = c
    if o then
      o = count_of[o] or parse_count(o)
      if not o then
        used = nil
      elseif l.n == 1 then
        if o > 0 then used = used + weighted(l, o) end
      else
        used = used + o
      end
    end
    if used and used + cost <= l.limit then
      if record then
        local n = c + cost
        rcall('HSET', key, l.field, text_of[n] or count_text(n))
        used = used + cost
      end
      local rem = l.limit - used
      if rem < 0 then rem = 0 end
      return 1, rem, 0, (l.b + l.n + 1) * l.P - now, 0, 1 -- reset_after: bucket b's end (below, last = b)
    end
  end
  if h.err then return general(key, cost, h) end
  local tag, oldest, b, high = l.tag, l.oldest, l.b, l.high
  local full, old, cur, newest, ns = 0, 0, 0, nil, 0
  for i = 1, #h, 2 do
    local f = h[i]
    local t, idx = field_tag[f], nil
    if t then idx = field_idx[f] else t, idx = parse_field(f) end
    if t ~= tag or idx > high then return general(key, cost, h) end
    if idx < oldest then
      if ns == STALE_MAX then return general(key, cost, h) end
      ns = ns + 1
      stale_names[ns] = f
    else
      local c = count_of[h[i + 1]] or parse_count(h[i + 1])
      if idx == oldest then old = c else full = full + c end
      if idx == b then cur = c end
      if not newest or idx > newest then newest = idx end
    end
  end
  local used = full
  if old > 0 then used = used + weighted(l, old) end
  if used + cost > l.limit then
    -- A rejection: what general() would read from this hash again (this limit's buckets alone, no
    -- block, nothing adopted; a rejection writes nothing, so its stale buckets wait), and then
    -- conclude, whose wait walks the buckets (counts_of). That second pass over the hash made a
    -- rejection of a window of 1,000 buckets cost Redis 690-1,157 us, 527-535 without it
    -- (docs/algorithms.md, "Work per decision").
    l.full, l.old, l.newest, l.cur, l.counts, l.adopted = full, old, newest, cur, nil, false
    l.used, l.allowed = used, false
    hash, blocked_until = h, nil
    return conclude(key, cost, false, nil, false)
  end
  local last = newest -- the newest bucket once written: the key's end (conclude)
  if record then
    local c = cur + cost
    rcall('HSET', key, l.field, text_of[c] or count_text(c))
    if ns > 0 then rcall('HDEL', key, unpack(stale_names, 1, ns)) end
    used = used + cost
    if not last or b > last then last = b end
  end
  local reset = 0
  if last then
    reset = (last + l.n + 1) * l.P - now
    if reset < 0 then reset = 0 end
  end
  if record and reset > 0 and not (newest and newest >= b) then
    rcall('PEXPIRE', key, ttl_text(ttl_ms(reset))) -- (conclude: the TTL holds otherwise)
  end
  local rem = l.limit - used
  if rem < 0 then rem = 0 end
  return 1, rem, 0, reset, 0, 1
end

-- A policy's new subject (or one whose key expired): no bucket anywhere, so every limit admits any
-- cost the call took (at most the least limit: epilogue.lua, cost_above), the least remaining is
-- the least limit's, at the first limit with that count, and a consume writes each limit's current
-- bucket, which it has left until (b + n + 1) * P, the hash the latest of those. What
-- decide_policy's three loops decide for an empty hash, in one (a third of a new subject's Lua
-- operations: a line hook in lua5.1).
local function fresh(key, cost)
  local each, m = each_out, #limits
  if not record then
    for i = 1, m do
      each[2 * i - 1] = limits[i].limit
      each[2 * i] = 0
    end
    return 1, most_cost, 0, 0, 0, least_at, nil, nil, each
  end
  local text, reset, packed = text_of[cost] or count_text(cost), 0, packable and 0
  for i = 1, m do
    local l = limits[i]
    local own_reset = l.b * l.P + l.span - now
    fields[2 * i - 1] = l.field
    fields[2 * i] = text
    if packed then -- (policy.lua, packable: every reset is b's)
      packed = packed + (l.limit - cost) * l.scale
    else
      each[2 * i - 1] = l.limit - cost
      each[2 * i] = own_reset
    end
    if own_reset > reset then reset = own_reset end
  end
  rcall('HSET', key, unpack(fields, 1, 2 * m))
  rcall('PEXPIRE', key, ttl_text(ttl_ms(reset)))
  return 1, most_cost - cost, 0, reset, 0, least_at, nil, nil, each, packed
end

-- A policy's: one pass over the hash, one over the limits to judge them, one to write and conclude.
local function decide_policy(key, cost, v)
  local h = v or rpcall('HGETALL', key)
  if h.err then return general(key, cost, h) end
  if #h == 0 then return fresh(key, cost) end
  local m = #limits
  for i = 1, m do
    local l = limits[i]
    l.full, l.old, l.newest, l.cur = 0, 0, nil, 0
  end
  local ns = 0
  for i = 1, #h, 2 do
    local f = h[i]
    local t, idx = field_tag[f], nil
    if t then idx = field_idx[f] else t, idx = parse_field(f) end
    local l = t and by_tag[t]
    if not l or idx > l.high then return general(key, cost, h) end
    if idx < l.oldest then
      if ns == STALE_MAX then return general(key, cost, h) end
      ns = ns + 1
      stale_names[ns] = f
    else
      local c = count_of[h[i + 1]] or parse_count(h[i + 1])
      if idx == l.oldest then l.old = c else l.full = l.full + c end
      if idx == l.b then l.cur = c end
      local newest = l.newest
      if not newest or idx > newest then l.newest = idx end
    end
  end
  -- held: general()'s (policy.lua); packed: the reply as one integer (policy.lua, packable), unless
  -- a limit's newest bucket lies past b, whose end is its reset; a count below 0 (not the
  -- library's) goes to general(), so that no remaining passes its limit, the radix of its digit.
  local held, packed, fits = nil, packable and 0, true
  for i = 1, m do
    local l = limits[i]
    local used, newest = l.full, l.newest
    if l.old > 0 then used = used + weighted(l, l.old) end
    if used < 0 then return general(key, cost, h) end
    l.used, l.allowed = used, used + cost <= l.limit
    fits = fits and l.allowed
    if newest then
      local ends = newest * l.P + l.span
      if not held or ends > held then held = ends end
      if newest > l.b then packed = nil end
    end
  end
  if not fits then -- a rejection: as decide_window's, what general() would read again, not read
    for i = 1, m do limits[i].counts, limits[i].adopted = nil, false end
    hash, blocked_until = h, nil
    return conclude(key, cost, false, nil, false)
  end
  local each, remaining, reset, decider = each_out, nil, 0, 1 -- (conclude)
  for i = 1, m do
    local l = limits[i]
    local used, last = l.used, l.newest
    if record then
      local c = l.cur + cost
      fields[2 * i - 1] = l.field
      fields[2 * i] = text_of[c] or count_text(c)
      used = used + cost
      if not last or l.b > last then last = l.b end
    end
    local rem, own_reset = l.limit - used, 0
    if rem < 0 then rem = 0 end
    if last then
      own_reset = last * l.P + l.span - now
      if own_reset < 0 then own_reset = 0 end
    end
    if packed then
      packed = packed + rem * l.scale
    else
      each[2 * i - 1] = rem
      each[2 * i] = own_reset
    end
    if own_reset > reset then reset = own_reset end
    if not remaining or rem < remaining then remaining, decider = rem, i end
  end
  if record then
    rcall('HSET', key, unpack(fields, 1, 2 * m))
    if ns > 0 then rcall('HDEL', key, unpack(stale_names, 1, ns)) end
    if reset > 0 and not (held and held >= now + reset) then rcall('PEXPIRE', key, ttl_text(ttl_ms(reset))) end
  end
  return 1, remaining, 0, reset, 0, decider, nil, nil, each, packed
end
