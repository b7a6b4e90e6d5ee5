-- Policy: several sliding-window limits checked together, recorded all-or-nothing, in one hash.
-- A single sliding window (SlidingWindow) is a policy of one limit. Its writes and waits (own,
-- give_back, take, retry_after, own_reset, conclude) are the part lua/parts/policy_writes.lua, and
-- its common paths (decide_window, fresh, decide_policy), which decide as general() does in fewer
-- Lua operations, the part lua/parts/policy_common.lua: cmake/embed_lua.cmake puts each in this
-- text where a line "-- Part:" below names it (a script is one text).
--
-- KEYS: one per request (prologue.lua): the state, which holds its block
-- state: hash, field "<tag>:<bucket>" = units admitted in that bucket under the limit <tag>
--        (<tag> is the limit's text, e.g. "1h@1m"; bucket = floor(t / precision))
-- ARGV[1..2] now; the head: mode, cost, then the parameters (prologue.lua; helpers.lua, params)
--          m, the number of limits, then four words per limit i = 1..m: tag, limit (units per
--          window), window (us), precision (us, divides the window)
-- Returns {allowed 0|1, remaining, retry_after_us, reset_after_us, delay_us = 0, deciding limit 1..m,
--          then for each limit i = 1..m: its own remaining, its own reset_after_us}: the first six
--          are the policy's (least remaining, longest reset), the pairs let a caller state every
--          limit truthfully (RateLimit header items, one per limit). A policy of one limit (every
--          sliding window) returns the first five alone, as the other scripts do: its limit's
--          remaining and reset are the policy's, and the deciding limit is 1; the client fills
--          Decision::limits from them (detail::decode_decision). An admission of a policy of
--          several limits returns the pairs alone, from which the client takes the first six
--          (conclude, below). Fewer integers for Redis to convert, about 440 instructions each
--          (epilogue.lua, reply).
--
-- Time math, per limit: P = precision, n = window / P, r = now mod P, b = (now - r) / P is the
-- current bucket. The window (now - window, now] holds buckets b-n+1 .. b entirely, and bucket
-- b-n only from now - window to its end (b-n+1)*P: P - r of its P microseconds. Its `old` units
-- weigh old * (P - r) / P, rounded up: a fraction of a request counts as a whole one, so the
-- weighted count is never below the real one and rounding never admits more. Computed as
-- old - floor(old * r / P) by muldiv() (old * r may pass 2^53 for big quotas and long windows), it
-- is exact for every count up to 2^40 and window up to ten years:
--   used = full + ceil(old * (P - r) / P),  admitted when used + cost <= limit
-- (the same as comparing full * P + old * (P - r) + cost * P with limit * P, without the product).
-- With P = window this is the classic two-window counter: 100 units in the first quarter of
-- minute 0 weigh 75 at 1.25 min, leaving room for 25; with P = window / 2 they weigh 50.
-- All-or-nothing: nothing is recorded unless every limit has room. A refund takes units back from
-- each limit's newest buckets, exact when it follows the request it refunds.
--
-- Reconfiguration: a limit's buckets are named by its window and precision (the tag), not its
-- count, so a changed count keeps what was consumed (remaining is clamped at 0). A limit with no
-- live bucket of its own takes over the buckets of a limit that left the policy (a changed window
-- or precision): those of the longest such window, each bucket's units dated at its last
-- microsecond (or now, if that is later) and regrouped into the new limit's buckets. Units are
-- thus never taken as older than they were: nothing leaves a window early. They are written under
-- the new tag at the next write; the old fields are deleted at the next admission.
-- This call's: the limits (read once per call: a batch decides many requests with them; what
-- depends on the request is reset at the start of each decision), the same by tag, and the width of
-- a decision. Set per call, below: parsed from the call's params (helpers.lua) once, then kept in
-- `policies` under that string, so that a later call with the same params (the same limiter, or
-- one of a service's few that take turns) parses nothing, and keeps its current bucket's name; the
-- limits' time fields (r, b, oldest = b - n, high) are set again. Past POLICIES_MAX params
-- the table starts again, as helpers.lua's heads do, so that it never grows the heap the
-- collector walks.
local limits, by_tag, width
local most_cost -- the least of the limits: the largest cost the policy can admit (helpers.lua, cost_above)
local least_at -- the first limit with that least count: a new subject's deciding one (fresh)
-- A policy's consume, alone in its call, answers an admission with one integer when it can (the
-- epilogue's `packed`): the limits' remaining as the digits of a mixed radix, limit i's of radix
-- limit_i + 1, the first the lowest: the sum of rem_i * scale_i, scale_i the product of the
-- radixes before limit i (each limit's `scale`, parse time). Each limit's reset_after is left out:
-- after an admission it is the end of the current bucket b's weight, (b + n + 1) * P - now, which
-- the client works out from the now it sent and the limit's geometry (detail::policy_pairs_of),
-- unless a bucket past b (written by a clock that ran ahead) is the newest: then the pairs go as
-- they are, and so they do when the time is Redis's (the client does not know it) or the radixes'
-- product reaches 2^53 (`radix_fits`, per policy). Redis converts a table to its reply element by
-- element: a policy (3)'s six integers cost about 5,500 instructions of its 80,000, one integer a
-- few hundred (callgrind on 7.0). `packable`: set per call, whether this call may pack.
local radix_fits, packable
local params_arg -- the params of the call that set `limits`
local policies, policies_n, POLICIES_MAX = {}, 0, 64
local state_is_string = false -- a hash, which holds its block (read, below)
local prefetch -- (below)

-- The units a bucket holds in a limit's window: the old one weighs (P - r) / P of them, rounded up.
-- old * r below 2^52 is divided inline (helpers.lua, TWO52): no call into C.
local function weighted(l, old)
  local p = old * l.r
  if p >= TWO52 then return old - muldiv(old, l.r, l.P) end
  local P = l.P
  local rem = p % P
  if rem < 0 then rem = rem + P end
  return old - (p - rem) / P
end

-- Counts of a limit that left the policy, regrouped into limit `l` (see Reconfiguration above).
-- `l` has no live bucket of its own, so its counts are the adopted ones alone.
local function adopt(l, src)
  local counts = {}
  for idx, c in pairs(src.counts) do
    local t = min((idx + 1) * src.P - 1, now)
    local i = floor_div(t, l.P)
    if i >= l.oldest then counts[i] = (counts[i] or 0) + c end
  end
  for i, c in pairs(counts) do
    if i == l.oldest then l.old = c else l.full = l.full + c end
    if not l.newest or i > l.newest then l.newest = i end
  end
  l.counts, l.cur, l.adopted = counts, counts[l.b] or 0, true
end

-- A field's tag and bucket, parsed once: every subject's hash names the same buckets, so the names
-- of a few buckets a limit serve every call. Kept across calls (a function's load part), for a
-- bucket of this call's limits that is still in its window (a stale one, which the next admission
-- deletes, or a limit's that left the policy, is parsed each time it is read), and dropped whole
-- past `live_buckets` + FIELDS_SPARE names: the live buckets (n + 2 a limit: b - n .. b + 1) of
-- every policy in `policies`, and FIELDS_SPARE more, for the buckets that left their window since
-- they were kept. So a window that holds all of its buckets (up to 10,000, MAX_BUCKETS) is parsed
-- once, not on every call (dropped past 4096 names, such a window's decision cost Redis 9.8 ms, 3.6 ms kept:
-- docs/performance.md, "Buckets"), and the cache holds little more than the buckets in use. Every
-- bucket interval names a new bucket: with a fixed bound of 16,384 names, a service's one-second
-- buckets filled it in four and a half hours, and those 2.5 MB (names and both tables) in the
-- Functions engine's Lua heap made every decision of every strategy cost Redis 1.6-2.6x what it did
-- on a fresh library: Redis steps the collector over the whole heap (docs/algorithms.md, "The Lua
-- heap"). nil, nil for a name that is not "<tag>:<bucket>" (a tag holds no ':', format_duration).
local field_tag, field_idx, fields_known = {}, {}, 0
local FIELDS_SPARE = 128
local live_buckets = 0 -- of the policies in `policies` (set with them, below)
local function parse_field(f)
  local tag = field_tag[f]
  if tag then return tag, field_idx[f] end
  local t, idx = split_field(f)
  if not t then return nil, nil end
  local l = by_tag[t]
  if l and idx >= l.oldest then
    if fields_known >= live_buckets + FIELDS_SPARE then field_tag, field_idx, fields_known = {}, {}, 0 end
    field_tag[f], field_idx[f], fields_known = t, idx, fields_known + 1
  end
  return t, idx
end

-- A count's text and number, remembered both ways: tonumber() runs the C library's strtod and
-- fmt() its printf, about a microsecond of Redis's time between them for every field read and
-- written, where a table lookup is a twentieth of that; counts are small integers that many subjects
-- and buckets share. Kept across calls, and dropped whole past COUNTS_MOST of each: enough for
-- the counts a busy limit's buckets share, few enough to keep the Lua heap small (above).
local count_of, text_of, counts_known, texts_known, COUNTS_MOST = {}, {}, 0, 0, 1024
local function parse_count(text)
  local c = tonumber(text)
  if not c then return nil end
  if counts_known >= COUNTS_MOST then count_of, counts_known = {}, 0 end
  count_of[text], counts_known = c, counts_known + 1
  return c
end
local function count_text(c)
  local text = text_of[c]
  if text then return text end
  if texts_known >= COUNTS_MOST then text_of, texts_known = {}, 0 end
  text = fmt(c)
  text_of[c], texts_known = text, texts_known + 1
  return text
end

-- What a decision knows of each limit after read(): its full and old units and newest bucket
-- (above), and `cur`, the units of its current bucket b, which take() adds to. The units of every
-- live bucket, bucket by bucket, are only walked by a rejection's wait, a refund and an adoption:
-- counts_of() sorts them out of the hash read when one of those asks, where filling and emptying
-- a table a limit on every decision cost a tenth of a policy's Redis time (an emptying pairs()
-- loop calls next() in C for every entry). `hash`: the decision's HGETALL reply.
local hash
local function counts_of(l)
  local counts = l.counts
  if counts then return counts end
  counts = {}
  for i = 1, #hash, 2 do
    local tag, idx = parse_field(hash[i])
    if tag == l.tag and idx >= l.oldest then counts[idx] = count_of[hash[i + 1]] or parse_count(hash[i + 1]) end
  end
  l.counts = counts
  return counts
end

-- The buckets of `counts` past `above` that hold units, oldest first: what a refund and a wait walk
-- bucket by bucket, since one a client whose clock runs ahead wrote may lie any number of intervals
-- past b.
local function buckets_with_units(counts, above)
  local list = {}
  for idx, c in pairs(counts) do
    if idx > above and c > 0 then list[#list + 1] = idx end
  end
  table.sort(list)
  return list
end

-- One pass over the hash: sort each bucket into its limit; anything too old, or left by a limit
-- no longer in the policy, is stale and deleted when we next write. Then limits without buckets
-- adopt those of the longest window that left (ties: the finer precision, then the tag).
-- `blocked_until`: the end of the block the hash holds (field BLOCK_FIELD, block.lua), when it
-- has not ended; one that has is stale like an old bucket.
local blocked_until
local function read(key, h)
  local stale, gone -- made when their first field turns up
  blocked_until = nil
  h = h or rpcall('HGETALL', key) -- (given: a common path read it)
  if h.err then -- a key of another type: no state (epilogue.lua, foreign keys)
    if record or refund then rcall('DEL', key) end
    h = {}
  end
  hash = h
  for i = 1, #h, 2 do
    local tag, idx = parse_field(h[i])
    local l = tag and by_tag[tag]
    if not tag and h[i] == BLOCK_FIELD and (tonumber(h[i + 1]) or 0) > now then
      blocked_until = tonumber(h[i + 1]) -- in force: kept, and decide() answers for it
    elseif l and idx >= l.oldest then
      local c = count_of[h[i + 1]] or parse_count(h[i + 1])
      if idx == l.oldest then l.old = c else l.full = l.full + c end -- buckets ahead of b: clock skew
      if idx == l.b then l.cur = c end
      local newest = l.newest
      if not newest or idx > newest then l.newest = idx end
    else
      stale = stale or {}
      stale[#stale + 1] = h[i]
      if tag and not l then
        gone = gone or {}
        local g = gone[tag]
        if not g then
          local w, P = parse_tag(tag)
          if w then g = {tag = tag, w = w, P = P, counts = {}} gone[tag] = g end
        end
        if g then g.counts[idx] = tonumber(h[i + 1]) end
      end
    end
  end
  if not gone then return stale end
  local src
  for _, g in pairs(gone) do
    if not src or g.w > src.w or (g.w == src.w and (g.P < src.P or (g.P == src.P and g.tag < src.tag))) then
      src = g
    end
  end
  if src then
    for i = 1, #limits do
      if not limits[i].newest then adopt(limits[i], src) end
    end
  end
  return stale
end

-- Part: parts/policy_writes.lua

-- decide: what the epilogue calls for each request, set per call (below): decide_window for one
-- limit, decide_policy for more, general for a refund.
local decide, general
-- Part: parts/policy_common.lua

-- Every decision the common path does not take; `h`: the HGETALL reply it read, if any.
function general(key, cost, h)
  for i = 1, #limits do
    local l = limits[i]
    l.full, l.old, l.newest, l.cur, l.counts, l.adopted = 0, 0, nil, 0, nil, false
  end
  local stale = read(key, h)
  if blocked_until and not refund then
    -- Blocked (block.lua): nothing left of any limit until the block ends, whatever the quota;
    -- nothing written. A refund goes through. Each limit is back to full quota at the later of the
    -- block's end and its own newest bucket's (conclude), as is the policy at the latest of those.
    local wait = blocked_until - now
    local reset = wait
    for i = 1, #limits do
      local lr = max(wait, own_reset(limits[i]))
      each_out[2 * i - 1] = 0
      each_out[2 * i] = lr
      if lr > reset then reset = lr end
    end
    return 0, 0, wait, reset, 0, 1, nil, nil, each_out
  end

  -- `held`: when the hash turns all stale as read, the latest end (newest + n + 1) * P of a limit's
  -- newest bucket, which the write that last moved it gave the key its TTL for (conclude); nil
  -- when no limit has a bucket, or one adopted another's (written under that limit's TTL).
  local allowed, adopted, held = true, false, nil
  for i = 1, #limits do
    local l = limits[i]
    local used, newest = l.full, l.newest
    if l.old > 0 then used = used + weighted(l, l.old) end
    local fits = used + cost <= l.limit
    l.used, l.allowed = used, fits
    allowed = allowed and fits
    adopted = adopted or l.adopted
    if newest then
      local ends = newest * l.P + l.span
      if not held or ends > held then held = ends end
    end
  end
  if adopted then held = nil end
  if refund then
    allowed = true
    give_back(key, cost)
  elseif allowed and record then
    take(key, cost, stale)
  end
  return conclude(key, cost, allowed, held, refund and adopted)
end

-- A spread call's read of a request's key before anything is written (epilogue.lua): the HGETALL
-- every path above starts with, which each then takes as given.
function prefetch(key)
  return first_read('HGETALL', key)
end

-- Per call: -------------------------------------------------------------------------------------
if params ~= params_arg then
  local built = policies[params]
  if not built then
    local list, tags = parse_limits(words(params)) -- (helpers.lua)
    local least, at, radix = list[1].limit, 1, 1
    for i = 2, #list do
      if list[i].limit < least then least, at = list[i].limit, i end
    end
    for i = 1, #list do -- (packable, above: a product past 2^53 rounds to 2^53 or more)
      list[i].scale = radix
      radix = radix * (list[i].limit + 1)
    end
    -- width: see above; a policy of one limit is a sliding window, whose integer is the epilogue's
    built = {list, tags, #list == 1 and 5 or 6 + 2 * #list, least, at, #list > 1 and radix < TWO53}
    if policies_n == POLICIES_MAX then policies, policies_n, live_buckets = {}, 0, 0 end
    policies[params], policies_n = built, policies_n + 1
    for i = 1, #list do live_buckets = live_buckets + list[i].n + 2 end -- (parse_field)
  end
  limits, by_tag, width, most_cost, least_at, radix_fits = built[1], built[2], built[3], built[4], built[5], built[6]
  params_arg = params
end
packable = radix_fits and record and #KEYS == 1 and ARGV[1] ~= 'redis'
for i = 1, #limits do -- each limit's place in time; `field`: its current bucket's name, `prev` the one before
  local l = limits[i]
  local P = l.P
  local r = now % P -- now mod P inline (helpers.lua, TWO52; fixed_window.lua)
  if r < 0 then r = r + P end
  l.r = r
  local b = (now - r) / P
  if b ~= l.b then
    local oldest = b - l.n
    l.b, l.oldest, l.high, l.field = b, oldest, b + 1, l.tag .. ':' .. fmt(b)
    l.prev = l.tag .. ':' .. fmt(b - 1)
  end
end
decide = not refund and (#limits == 1 and decide_window or decide_policy) or general
