-- Sliding log: one sorted-set entry per admitted request, carrying its cost, scored by its time.
--
-- KEYS: one per request (prologue.lua): the state, which holds the subject's block
-- state: sorted set, an entry per admission scored by its time (us): <cost> units admitted at that
--        time, and <cum> the units admitted to this key up to and including them, modulo CUM_MOD
--        (below), so that the units in any run of entries is a difference of two cums, modulo
--        CUM_MOD. A member in one of two forms (parse):
--        text "<cum>/<cost>", <cum> zero-padded to 16 digits; or compact, 20 bytes,
--        pack('>I7I6I7', cum, cost, time);
--        and while a block is in force (block.lua) the member "~blk:<blocked until>", scored +inf
--        (helpers.lua, BLOCK_MEMBER): the newest entry's read meets it, so a decision reads no other
--        key for the block (decide, at the end)
-- ARGV[1..2] now; the head: mode, cost, then the parameters (prologue.lua; helpers.lua, params)
--          "<limit> <window> [compact]": the units admitted in any window, the window's length
--          (us), and "compact" to write new entries in the compact form (Options::sliding_log_members)
-- Returns {allowed 0|1, remaining, retry_after_us, reset_after_us, delay_us = 0}
--
-- Time math: a request admitted at t counts during [t, t + window); at `now` it has left the window
-- when t <= now - window. An entry is stamped max(now, the newest entry's time) — a client whose
-- clock lags cannot date units before others already in the log — so time order and cum order
-- agree, and the zero padding makes the member order of entries of one microsecond the cum order too.
-- Units in the window = cum(newest) - (cum(oldest live) - cost(oldest live)), modulo CUM_MOD.
-- cum is kept modulo CUM_MOD = 2^50 because a log that never empties (a subject never idle for a
-- window) adds up its costs for ever: byte counts at 1 GB/s passed 2^53 in 104 days, where a double
-- rounds them (two admissions then wrote one member: the second was admitted and never counted)
-- and the text form outgrew its 16 digits (ordered as text, a 17-digit cum sorts before 16). A
-- difference modulo 2^50 is exact while the window holds less, and it holds at most the limit
-- (<= 2^40). An entry whose cum wrapped sorts before the newest among entries of one score, so it
-- is stamped a microsecond later, as below; a log an earlier build wrote past 2^50 reads the same.
-- The two forms mix in one log (a deploy turning compact on or off), in both orders: among entries
-- of one score a compact member sorts first (its first byte is below a digit's), so a compact entry
-- is stamped at least a microsecond after a text newest (it then counts a microsecond longer),
-- and a text one after a compact newest needs nothing.
-- The oldest live entry is the first scored past the cutoff (ZRANGEBYSCORE ... LIMIT 0 1), whether
-- or not the entries that left are still there: they are trimmed, oldest first, by the admission
-- whose cum crosses a multiple of trim_every = min(floor(limit / 8), TRIM_MOST / 8) units (every
-- admission when that is 1 or less), not by every one, and a trim removes at most TRIM_MOST of
-- them (ZCOUNT, then ZREMRANGEBYRANK). Removing them all at once held Redis for the removal of
-- each: 360 ms for the million entries of a log of a million whose subject slowed down, 56 ms for
-- an eighth of it in steady use; a trim of TRIM_MOST takes about a millisecond. Between two trims
-- fewer than trim_every units, so fewer than TRIM_MOST / 8 entries, are admitted, and a trim
-- removes every entry that left or TRIM_MOST of them: the set never outgrows 9/8 of the entries of
-- a full window, or what it held when it was larger (a limit lowered), which each trim then
-- shrinks by at least 7/8 TRIM_MOST.
-- The key's TTL is the newest entry's time plus the window (plus ttl_ms's margin), set by the first
-- admission whose entry falls in a new RENEW_SLOT (half a second, aligned to the epoch), not by each:
-- the admissions of that slot end at most RENEW_SLOT after the one that set it, which the margin
-- (a second) covers with half a second to spare. A refund sets it too (it may pop the newest entry).
-- Work per decision is bounded by the requests, never the cost: the trim removes entries once each
-- (amortised O(log n)), the sums are two reads of one entry, an admission is one ZADD whatever its cost,
-- and a rejection's wait is a binary search over ranks (O(log^2 n), one probe when every cost is 1).
-- A refund removes the newest `cost` units (whole entries, the last one shortened; give_back), exact
-- when it follows the request it refunds. A log written by 0.2 (members without '/') is restarted.
-- Foreign members, which neither form parses (a 0.2 client's in a deploy that mixes versions, or
-- anyone's), hold no units: a log whose newest or oldest live member is one is restarted (its units
-- cannot be told), one elsewhere is passed over by a refund's pops, and a refund's cut or a
-- rejection's wait that meets one restarts the log or waits for every entry to leave (the newest's
-- time + window: never too early), rather than fail the call until the key expires.
local limit, window, cutoff -- this call's: limit, window length (us), now - window (scores <= cutoff
                            -- have left the window)
local trim_every -- this call's: units between two trims (see above)
local TRIM_MOST = 1024 -- entries a trim removes at most (see above)
local RENEW_SLOT = TTL_MARGIN_MS * 500 -- us: half the TTL's margin (see above)
local params_arg -- the string limit and window were parsed from (helpers.lua, params)
-- now and cutoff as text, made once a call, when a request first needs them: every request of a
-- batch shares them (fmt() is a call into the C library's printf)
local now_str, cutoff_str, after_cutoff_str
local function now_text()
  if not now_str then now_str = fmt(now) end
  return now_str
end
local function cutoff_text()
  if not cutoff_str then cutoff_str = fmt(cutoff) end
  return cutoff_str
end
local function after_cutoff_text() -- ZRANGEBYSCORE's exclusive bound: scores > cutoff
  if not after_cutoff_str then after_cutoff_str = '(' .. cutoff_text() end
  return after_cutoff_str
end
local compact -- this call's: admissions write compact entries (params' third word)
local COMPACT, TEXT = '>I7I6I7', '%016d/%d' -- the two forms of a member: struct and format strings
local CUM_MOD = 1125899906842624 -- 2^50: cums are kept modulo it (see above)
local state_is_string, width = false, 5
local prefetch -- (below)
local most_cost -- the largest cost the call's log can admit: its limit (helpers.lua, cost_above)
-- How many members sit above the newest entry in this decision's set: 1 when it reads the log
-- under a block member it leaves there (a peek, and a request the block rejects), else 0.
local above = 0

-- An entry's member: its cum, its cost (unless only the cum is wanted) and, for a compact member,
-- its time; nil for a 0.2 member "<time>:<seq>" or any other. A text member's time is its score,
-- which Redis prints with "%.17g" for ZRANGE ... WITHSCORES and Lua reads back with strtod: the
-- compact form, one unpack, cost a batched decision 18% fewer instructions in Redis (callgrind,
-- docs/algorithms.md). A text member's cum digits (16, more past 10^16) end at its one '/': a
-- plain find from the 17th byte and sub() cost Redis less than a pattern match, and the cost is
-- only converted when asked for (tonumber() runs the C library's strtod).
-- A text member is told from a compact one by its first byte (a digit) only when it too is 20
-- bytes long, which a cost of 1 never is: the length is a VM operation, byte() a call into C.
local function parse(member, cum_only)
  if #member == 20 and byte(member, 1) < 48 then -- below '0': compact
    local c, k, t = unpack_(COMPACT, member)
    return c, k, t
  end
  local slash = find(member, '/', 17, true)
  if not slash then return nil end
  local c = tonumber(sub(member, 1, slash - 1))
  if cum_only then return c end
  local k = tonumber(sub(member, slash + 1))
  if not (c and k) then return nil end
  return c, k
end
-- The member of an entry: compact when its time is given, else text. Compact keeps byte order the
-- cum order among entries of one score, as the text's padding does: cum comes first, big-endian.
local function member(cum, cost, t)
  if t then return pack(COMPACT, cum, cost, t) end
  return format(TEXT, cum, cost)
end

-- The entry at rank i: cum, cost, and its time when `timed`. Ranks and scores go to redis.call()
-- as text: Redis would print a number with "%.17g", the C library's slower floating-point printer.
local function at_rank(key, i, timed)
  local rank = (i == 0) and '0' or fmt(i)
  if not timed then
    local c, k = parse(rcall('ZRANGE', key, rank, rank)[1])
    return c, k
  end
  local e = rcall('ZRANGE', key, rank, rank, 'WITHSCORES')
  local c, k = parse(e[1])
  return c, k, tonumber(e[2])
end

-- How many entries have left the window and are still in the set (the trim removes them later):
-- the ranks below it are theirs.
local function gone(key) return rcall('ZCOUNT', key, '-inf', cutoff_text()) end

-- The first live rank whose cum reaches `target` units past `base`, the cum before the oldest live
-- entry (the newest's does): the ranks from gone() to the newest's. Cums are compared as their
-- distance from base, modulo CUM_MOD (% in the VM is never negative for a positive divisor). cum
-- grows by at least 1 a rank, so the answer is at most the oldest live rank + target - 1, exactly
-- that when every cost is 1: then one probe confirms it. Otherwise a binary search. nil when a
-- probe meets a foreign member (above).
local function rank_reaching(key, target, base)
  local lo, card = gone(key), rcall('ZCARD', key) - above -- (a block member above: entries only)
  local hi = min(card - 1, lo + target - 1)
  if hi > lo then
    local c = at_rank(key, hi - 1)
    if not c then return nil end
    if (c - base) % CUM_MOD >= target then
      hi = hi - 1
      while lo < hi do
        local mid = floor_div(lo + hi, 2)
        c = at_rank(key, mid)
        if not c then return nil end
        if (c - base) % CUM_MOD >= target then hi = mid else lo = mid + 1 end
      end
    end
  end
  return hi, card
end

-- An entry whose cum lies `over` units past the cut of a refund, shortened to end at the cut, in
-- its own form (t: the entry is compact); `score` as ZRANGE gave it.
local function shorten(key, score, c, k, t, over)
  c = c - over
  if c < 0 then c = c + CUM_MOD end -- it had wrapped
  rcall('ZADD', key, score, member(c, k - over, t))
end

-- The entries of ranks `r` and above removed, of `card`. ZREMRANGEBYRANK frees each on Redis's
-- main thread, about 0.3 us an entry: 287-326 ms for 999,990 of a million. When far fewer stay
-- than leave, the set is rebuilt from those that stay instead: read, the key unlinked (a big set is
-- freed off the main thread), written back in one ZADD, about 3 us an entry kept (0.65-0.85 ms in
-- all for those 999,990: scripts/refund_cost.sh). So the rebuild is taken when 16 times fewer
-- entries stay than leave, and for REBUILD_MOST entries at most (4-8 ms measured; a ZADD of twice
-- as many arguments as entries stays within what unpack() may put on Lua's stack). A refund of half a
-- big log still holds Redis for the removal of half (docs/algorithms.md). The scores come back as
-- ZRANGE printed them ("%.17g": exact, times are integers below 2^53), the members as they were;
-- the caller sets the TTL (a refund always does).
local REBUILD_MOST = 1024
local function cut_above(key, r, card)
  if r > REBUILD_MOST or r * 16 >= card - r then
    rcall('ZREMRANGEBYRANK', key, fmt(r), '-1')
    return
  end
  local kept = r > 0 and rcall('ZRANGE', key, '0', fmt(r - 1), 'WITHSCORES')
  rcall('UNLINK', key)
  if not kept then return end
  local args = {}
  for i = 1, #kept, 2 do args[i], args[i + 1] = kept[i + 1], kept[i] end -- ZADD: score, member
  rcall('ZADD', key, unpack(args))
end

-- A refund of `left` of the `used` units in the window (base: the cum before its oldest live
-- entry): whole entries from the newest, the last one shortened. The entries of a refund of the
-- request just admitted, or of a few, are popped one by one; past REFUND_POPS the cut is found by
-- rank (rank_reaching) and what lies above it removed at once (cut_above), and a refund of every
-- live unit drops the log (UNLINK: a big set is freed off the main thread). Popped one by one, a
-- refund of a million entries of cost 1 held Redis for 2.5 s.
-- A foreign member (above) is passed over by the pops; met by the cut, it restarts the log (true:
-- dropped, every unit back).
local REFUND_POPS = 8
local function give_back(key, left, used, base)
  local keep = used - left -- units past base that stay
  if keep == 0 then
    rcall('UNLINK', key)
    return
  end
  for _ = 1, REFUND_POPS do
    local e = rcall('ZPOPMAX', key)
    local c, k, t = parse(e[1])
    if k then
      if k > left then return shorten(key, e[2], c, k, t, left) end
      left = left - k
      if left == 0 then return end
    end
  end
  local r, card = rank_reaching(key, keep + 1, base)
  local e = r and rcall('ZRANGE', key, fmt(r), fmt(r), 'WITHSCORES')
  local c, k, t
  if e then c, k, t = parse(e[1]) end
  if not k then
    rcall('UNLINK', key)
    return true
  end
  local over = (c - base) % CUM_MOD - keep -- its units past the cut: 1 to k
  cut_above(key, r, card)
  if over < k then shorten(key, e[2], c, k, t, over) end
end

-- The trim (see above): the entries that left, oldest first, TRIM_MOST of them at most. Ranks, as
-- scores, go to redis.call() as text.
local function trim(key)
  local n = gone(key)
  if n > 0 then rcall('ZREMRANGEBYRANK', key, '0', fmt(min(n, TRIM_MOST) - 1)) end
end

-- The entry at `rank` from the top ('-1' the newest, '-2' the one below a block member): its cum
-- (nil for a foreign member, or none), its time, whether it is a text entry while this call writes
-- compact ones, and its member; false for a key of another type (epilogue.lua, foreign keys).
-- Without its score when this call writes compact entries: the entry then carries its time,
-- unless it is a text entry, whose score is asked for (ZSCORE) until a compact one follows it.
-- `e`: that ZRANGE's reply, when a spread call read it already (prefetch, below).
local function entry_at_top(key, rank, e)
  if not e then
    if compact then e = rpcall('ZRANGE', key, rank, rank) else e = rpcall('ZRANGE', key, rank, rank, 'WITHSCORES') end
  end
  if e.err then return false end
  local m = e[1]
  if not m then return nil end
  if not compact then return parse(m, true), tonumber(e[2]), false, m end
  local c, _, t = parse(m, true) -- a text newest's cost is not wanted
  if c and not t then return c, tonumber(rcall('ZSCORE', key, m)), true, m end
  return c, t, false, m
end

-- One request against the log whose newest entry entry_at_top() read (cum false: a key of
-- another type; nil with a member: a foreign one or a 0.2 log's).
local function judge(key, cost, cum, newest_t, newest_text, m)
  -- The oldest live entry next (past the entries that left and are still there).
  local base, used = 0, 0
  local renew -- an admission sets the key's TTL (see above)
  if cum == false then -- a key of another type: no state
    if record or refund then rcall('DEL', key) end
    cum = nil
  elseif m then
    if not cum then -- a 0.2 log: restarted (UNLINK: a big one is freed off the main thread)
      if record or refund then rcall('UNLINK', key) end
    elseif newest_t <= cutoff then
      if record or refund then rcall('UNLINK', key) end -- every entry has left the window
      cum = nil
    else
      local c, k = parse(rcall('ZRANGEBYSCORE', key, after_cutoff_text(), '+inf', 'LIMIT', '0', '1')[1])
      if c then
        base = c - k
        used = (cum - base) % CUM_MOD
      elseif record or refund then -- foreign (above): restarted
        rcall('UNLINK', key)
      end
    end
  end
  if used == 0 then cum = nil end

  local allowed = refund or used + cost <= limit
  if refund then
    local left = min(cost, used)
    if left > 0 and give_back(key, left, used, base) then left = used end -- (restarted)
    used = used - left
  elseif allowed and record then
    -- The slots and the trim's multiples compared as a - a % b, the VM's own arithmetic (times and
    -- counts are integers >= 0 below 2^53: exact, helpers.lua, TWO52), where floor_div and max
    -- were Lua and C calls, each costing Redis about as much as the arithmetic.
    local t = now
    if cum and newest_t > now then t = newest_t end
    local after = (cum or 0) + cost
    local wrapped = after >= CUM_MOD -- (see above: cum modulo CUM_MOD)
    if wrapped then after = after % CUM_MOD end -- (a log an earlier build wrote may be past it)
    -- A compact entry after a text newest, or a wrapped cum, sorts before the newest (see above).
    if (newest_text or wrapped) and t == newest_t then t = t + 1 end
    renew = not cum or t - t % RENEW_SLOT ~= newest_t - newest_t % RENEW_SLOT
    if cum and (trim_every <= 1 or wrapped or cum - cum % trim_every ~= after - after % trim_every) then
      trim(key)
    end
    cum = after
    newest_t = t
    -- The member built here rather than by member(): a Lua call less an admission.
    rcall('ZADD', key, t == now and now_text() or fmt(t),
      compact and pack(COMPACT, cum, cost, t) or format(TEXT, cum, cost))
    used = used + cost
  end

  local retry_after = 0
  if not allowed then
    -- Room for `cost` once the first used + cost - limit units past base have left: that many are
    -- live (used + cost > limit) and at most used (cost <= limit: a larger one fails the call,
    -- helpers.lua's cost_above); the entry holding the last of them leaves at its time + window.
    local r = rank_reaching(key, used + cost - limit, base)
    local c, t, _
    if r then c, _, t = at_rank(key, r, true) end
    if not c then t = newest_t end -- (a foreign member met: above)
    retry_after = t + window - now
  end
  local reset_after = 0
  if used > 0 then
    if refund then newest_t = tonumber(rcall('ZRANGE', key, '-1', '-1', 'WITHSCORES')[2]) end
    reset_after = newest_t + window - now
    if reset_after < 0 then reset_after = 0 end
    -- A refund too: shortening the only entry pops it (Redis deletes the emptied set) and adds it
    -- back, a new key without a TTL.
    if (allowed and record and renew) or refund then rcall('PEXPIRE', key, ttl_text(ttl_ms(reset_after))) end
  end
  local remaining = limit - used
  if remaining < 0 then remaining = 0 end
  return allowed and 1 or 0, remaining, retry_after, reset_after, 0, 1
end

-- A decision (epilogue.lua). A log without a block member reads its newest entry and goes on; one
-- with it (block.lua) reads the entry below it:
-- - in force, a request other than a refund is rejected with the block's wait, whatever the
--   quota, and nothing is written; its reset_after is the later of the block's end and the log's
--   own, from a peek of the log under the member (as epilogue.lua's blocked_reset);
-- - a block that has ended is deleted by the first consume or refund that meets it (ZREM: a set
--   left empty is deleted by Redis), and a peek reads past it;
-- - a refund during the block takes the member out, gives its units back, and puts the member
--   back, with a TTL that outlives both the block and the log (PEXPIRE of the later).
-- A peek of the log under its block member, which stays (record off: nothing is written).
local function peek_under(key, cost)
  local saved = record
  record, above = false, 1
  local a, rem, retry, reset, delay, decider = judge(key, cost, entry_at_top(key, '-2'))
  record, above = saved, 0
  return a, rem, retry, reset, delay, decider
end

-- `v`: the newest entry's ZRANGE, when a spread call read it before deciding (prefetch, below).
local function decide(key, cost, v)
  local cum, newest_t, newest_text, m = entry_at_top(key, '-1', v)
  local held = cum == nil and m and block_end(m) -- (helpers.lua; a foreign member: nil)
  if not held then return judge(key, cost, cum, newest_t, newest_text, m) end
  if held > now and not refund then
    local _, _, _, reset = peek_under(key, cost)
    local wait = held - now
    return 0, 0, wait, max(wait, reset), 0, 1
  end
  if not (record or refund) then return peek_under(key, cost) end
  rcall('ZREM', key, m)
  local a, rem, retry, reset, delay, decider = judge(key, cost, entry_at_top(key, '-1'))
  if held > now then -- a refund during the block (above)
    rcall('ZADD', key, '+inf', m)
    rcall('PEXPIRE', key, ttl_text(ttl_ms(max(held - now, reset))))
  end
  return a, rem, retry, reset, delay, decider
end

-- A spread call's read of a request's key before anything is written (epilogue.lua): decide()'s
-- own first read, the newest entry, which it then takes as given.
function prefetch(key)
  if compact then return first_read('ZRANGE', key, '-1', '-1') end
  return first_read('ZRANGE', key, '-1', '-1', 'WITHSCORES')
end

-- Per call: -------------------------------------------------------------------------------------
if params ~= params_arg then
  local p = words(params) -- checked (helpers.lua, param), then kept: params_arg is set last
  if #p ~= 3 or p[3] ~= 'compact' then param_words(p, 2, 'a sliding log') end
  limit, window = param(p, 1, 1, MAX_COUNT, 'limit'), param(p, 2, 1, MAX_WINDOW, 'window')
  compact = p[3] == 'compact'
  trim_every = min(floor_div(limit, 8), TRIM_MOST / 8)
  most_cost = limit
  params_arg = params
end
cutoff = now - window
now_str, cutoff_str, after_cutoff_str = nil, nil, nil
above = 0 -- (decide sets it back itself; a call that failed inside judge() may not have)
