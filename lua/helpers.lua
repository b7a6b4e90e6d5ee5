-- Helpers: pure functions of their arguments, shared by every script in this folder. As EVAL
-- scripts each one starts with this file; as a Redis Functions library it runs once, when the
-- library loads, and every function closes over it (cmake/embed_lua.cmake): no per-call cost.
--
-- Every time and quantity is an integer held in a Lua double, exact below 2^53: microsecond
-- timestamps until 2255, counts up to 2^40, windows up to ten years (< 2^49 us). A product of two
-- of them may not be exact: the scripts form such products only through muldiv() below.
-- math.fmod is exact on such integers, so floor_div/ceil_div are too. Numbers are written back
-- with fmt(): Lua's own tostring keeps only 14 digits, and '%d' formats an integer directly
-- where '%.0f' would run the C library's slower floating-point printer.
-- Longer than this folder's other files: a script is one text (cmake/embed_lua.cmake), and every
-- one of them starts with this one, so what two scripts share lives here rather than in a copy.

-- The library functions the scripts call per request, as locals: a global lookup and a field
-- lookup less each time, which a batch of hundreds of requests notices. Bound by the prologue's
-- first call, not here: Redis 7.0 loads a Functions library with no global but `redis` in reach,
-- and its `redis` then has no call(). redis.call and redis.pcall too (rcall, rpcall): about 280 of
-- Redis's instructions a command (callgrind on 7.0: a token bucket's single decision 37,078 to
-- 36,347, the 3-limit policy's 75,181 to 73,996; scripts/instructions.sh ... seq).
local fmod, max, min, format, match, byte, find, sub, gmatch, pack, unpack_, type_, rcall, rpcall
local function bind_libraries()
  fmod, max, min, format, match, byte = math.fmod, math.max, math.min, string.format, string.match, string.byte
  type_ = type
  find, sub, gmatch = string.find, string.sub, string.gmatch
  pack, unpack_ = struct.pack, struct.unpack
  rcall, rpcall = redis.call, redis.pcall
end

-- The call's clock and mode, which the prologue sets at the start of every call (a script never
-- runs inside another, so one set serves all): upvalues of the functions defined at load rather
-- than locals of each call, so that those functions need not be created again on every call.
-- spread: the call's requests lie in many slots of one cluster node (the library's <name>_spread
-- functions, cmake/embed_lua.cmake, set it for their call; as an EVAL script, spread_eval.lua does).
local now, record, refund, spread
-- in_place: the epilogue's word to a string state's decide(), set before each decision: the key
-- holds the value decide() is given and nothing more (no block), and nothing later in the call
-- reads back what is written (one request, or a batch of distinct keys: `written`, epilogue.lua).
-- A bucket whose write keeps its unit, lease and TTL then writes the head of its state alone
-- (BUCKET_HEAD, below), which SETRANGE lays over the key's first bytes.
local in_place
-- A spread call's KEYS and ARGV, from its arguments: args[at] is how many keys follow it, then the
-- keys, then the call's ARGV (the library's <name>_spread functions read theirs from 1;
-- spread_eval.lua from 2, after its marker).
local function unspread(args, at)
  local m, keys, argv = tonumber(args[at]), {}, {}
  for i = 1, m do keys[i] = args[at + i] end
  for i = at + m + 1, #args do argv[i - at - m] = args[i] end
  return keys, argv
end
-- A spread call's first read of one request's key, made for every request before anything is
-- written (epilogue.lua, `prefetch`): the command a script's decide() would read the state with,
-- caught as its own read catches a key of another type (WRONGTYPE, which decide() then deletes and
-- starts again from), and any other error raised again as redis.call would have raised it: a key
-- this node does not serve (a slot that moved, or is moving) ends the call with nothing written.
local function first_read(...)
  local r = rpcall(...)
  local err = r.err
  if err and sub(err, 1, 9) ~= 'WRONGTYPE' then error(err, 0) end
  return r
end
-- The call's head, ARGV[2]: "<mode> <cost> <parameters>" (prologue.lua), read by read_head into
-- mode (a string), cost1 (request 1's cost, a number), cost1_arg (the same as redis.call() should
-- send it: the head's digits when they are the number's own, which Redis then need not print with
-- "%.17g", a twelfth of a fixed window's decision; else the number), params (the rest: a script's
-- parameters, space-separated, or '' when it has none), and record and refund above. One argument
-- rather than one each: each argument costs Redis an object, and Lua a string and a slot in ARGV (a single
-- decision's 5 arguments cost about 1,000 instructions more than 3, callgrind on Redis 7.0). A
-- limiter sends the same head on every call, so the prologue reads a head only when it differs
-- from the last call's (head_arg: Lua interns strings, so comparing them is comparing pointers),
-- and read_head keeps what it parsed of up to HEADS_MAX heads (a service's few limiters, each
-- consuming and peeking) so that calls that take turns parse none again; past that (costs that
-- vary from call to call) the table starts again, so that it never grows the heap the collector
-- walks. A script parses its own parameters again only when params differs from its last call's.
-- tonumber() runs the C library's strtod twice (lua_isnumber, then lua_tonumber), a tenth of a
-- microsecond a number.
local mode, cost1, cost1_arg, params, head_arg
local heads, heads_n, HEADS_MAX = {}, 0, 64
-- The client's bounds (Limit::max_count, Limit::max_window; include/redlimit/impl/strategies-inl.hpp),
-- which it checks before any I/O; the scripts check them again for calls made past it (param, below).
local MAX_COUNT, MAX_WINDOW = 1099511627776, 315360000000000
-- `s` as a call carries a number the scripts check: a decimal integer in [lo, hi], else nil. A
-- request's cost (the head's, or a batch's later ones in ARGV[3..]) is one in [1, MAX_COUNT]: a cost
-- of 0 made a sliding log's entries weigh nothing. So is a parameter (param, below).
local function integer_in(s, lo, hi)
  local v = s and match(s, '^%d+$') and tonumber(s)
  if v and v >= lo and v <= hi then return v end
  return nil
end
local function read_head(s)
  local h = heads[s]
  if not h then
    local m, c, p = match(s, '^([0-4]) (%d+) ?(.*)$')
    if not (m and integer_in(c, 1, MAX_COUNT)) then
      error('ARGV[2] is not "<mode> <cost> <parameters>" with a cost in [1, 2^40]: ' .. tostring(s))
    end
    local n = tonumber(c)
    h = {n, m, p, m == '1' or m == '4', m == '2', format('%d', n) == c and c or n}
    if heads_n == HEADS_MAX then heads, heads_n = {}, 0 end
    heads[s], heads_n = h, heads_n + 1
  end
  cost1, mode, params, record, refund, cost1_arg = h[1], h[2], h[3], h[4], h[5], h[6]
  head_arg = s
end

local function fmt(x) return format('%d', x) end

-- A cost is also at most `most`, the least limit of the script's parameters (its `most_cost`): a
-- larger one is never admitted, and its wait would be a time it still does not fit at. The client
-- refuses it before any I/O (Strategy::check_cost); a raw call fails before anything is written.
-- Request 1's is compared where a call starts (no call on the single path); later_costs() reads
-- the costs of requests 2..n, which close ARGV unless every request costs cost1 (prologue.lua), and
-- returns the place before them (request i's is argv[first + i]), or false when none is sent.
local function cost_above(cost, most)
  error(format('redlimit: a cost of %d is above the limit of %d: no such request can be admitted', cost, most), 0)
end
local function later_costs(argv, n, most)
  local first = #argv > 2 and #argv - n
  if not first then return false end
  for i = 2, n do
    local c = integer_in(argv[first + i], 1, MAX_COUNT)
    if not c then error('ARGV[' .. (first + i) .. '] (a cost) is not an integer in [1, 2^40]') end
    if c > most then cost_above(c, most) end
  end
  return first
end

-- A script's parameters (params, split by words()), checked where the script parses them, once per
-- params string, before it touches a key: word i must be a decimal integer in [lo, hi]. The client
-- checks the same bounds (MAX_COUNT and MAX_WINDOW, above) and throws before any I/O, so only a
-- call made past it (a hand-written FCALL, another language's port) can fail here.
-- Unchecked, a window or precision of 0 made the time math NaN (fields named "nan", a TTL Redis
-- refuses halfway through a call), and a tag that names buckets of another precision sent a wait's
-- walk through millions of intervals. The memory twin checks the same (src/memory/params.cpp).
local function param(p, i, lo, hi, what)
  local w = p[i]
  local v = integer_in(w, lo, hi)
  if not v then
    error(format('redlimit: parameter %d (%s) is not an integer in [%d, %d]: %s', i, what, lo, hi, tostring(w)), 0)
  end
  return v
end
local function param_words(p, n, what)
  if #p ~= n then error(format('redlimit: %s takes %d parameters, got %d', what, n, #p), 0) end
end
-- A bucket's "<capacity> <unit> <rate>" (token_bucket.lua, leaky_bucket.lua): a rate of `rate` ticks
-- a microsecond, `unit` ticks a token, that fills or drains the whole bucket within MAX_WINDOW,
-- capacity * unit <= MAX_WINDOW * rate. The client compares the products exactly; here they are
-- doubles, which round each product to nearest, a monotone step: a rate the client took passes.
local function param_rate(p)
  local capacity, unit = param(p, 1, 1, MAX_COUNT, 'capacity'), param(p, 2, 1, MAX_WINDOW, 'ticks a unit')
  local rate = param(p, 3, 1, MAX_COUNT, 'ticks a microsecond')
  if capacity * unit > MAX_WINDOW * rate then
    error(format('redlimit: a bucket of %s takes longer than ten years to fill or drain', params), 0)
  end
  return capacity, unit, rate
end
-- The words of a string (a script's parameters, params), in order.
local function words(s)
  local out = {}
  for w in gmatch(s, '%S+') do out[#out + 1] = w end
  return out
end
local function floor_div(a, b) return (a - fmod(a, b)) / b end
local function ceil_div(a, b)
  local r = fmod(a, b)
  return (a - r) / b + ((r > 0) and 1 or 0)
end
-- floor(a * b / c) and (a * b) mod c, exactly, for integers a, b >= 0 and 0 < c < 2^49 whose
-- quotient is below 2^53 (counts times times, which can reach 2^89). When a * b is below 2^53 the
-- double product is exact and one division does. Otherwise b = qb * c + rb, so
-- a * b / c = a * qb + a * rb / c, and a * rb / c (rb < c) is long division: a's digits in base
-- s = 2^k go in from the top, keeping a remainder below c; rem * s + digit * rb < 2 * s * c, which
-- k is chosen to keep within 2^53. At most 49 / k + 1 rounds (k >= 3): only quotas near the ends
-- of the range take this path.
local TWO53 = 9007199254740992
-- The hot paths (a bucket's refill or leak and its time to full or empty, a sliding window's
-- weighted bucket) divide a product p below 2^52 by c < 2^49 inline, as
--   r = p % c; if r < 0 then r = r + c end; q = (p - r) / c
-- Lua's % is p - floor(p / c) * c, worked in the VM: p / c may round up to the next integer, which
-- leaves r short by c, and the test puts it back; floor(p / c) * c stays below p + c < 2^53, so
-- it is exact. A call, into C (fmod) or to a Lua function (muldiv), costs Redis about as much as
-- the arithmetic around it: inlined, a batched bucket decision took a fifth fewer instructions
-- (callgrind, Redis 7.0). Bigger products go through muldiv.
local TWO52 = 4503599627370496
local function muldiv(a, b, c)
  local p = a * b
  if p < TWO53 then
    local r = fmod(p, c)
    return (p - r) / c, r
  end
  local rb = fmod(b, c)
  local q = a * ((b - rb) / c)
  local s = 2
  while 4 * s * c <= TWO53 do s = s * 2 end
  local digits, x = {}, a
  while x > 0 do
    local d = fmod(x, s)
    digits[#digits + 1] = d
    x = (x - d) / s
  end
  local qq, rem = 0, 0
  for i = #digits, 1, -1 do
    local t = rem * s + digits[i] * rb
    rem = fmod(t, c)
    qq = qq * s + (t - rem) / c
  end
  return q + qq, rem
end

-- PEXPIRE/PX argument for a state that is back to its empty value `us` from now. A TTL is garbage
-- collection, never part of a decision: every state says in itself when it stops mattering, so it
-- may outlive that freely, and it does by a margin of a second. Redis expires keys on its own
-- clock, in real time, while `now` is the caller's (a ManualClock held still, a client running
-- behind): without the margin a key could vanish while it still matters at the caller's time,
-- and the same call would be decided differently a few real milliseconds later. The extra
-- millisecond covers Redis counting expiry in whole milliseconds of its own clock.
local TTL_MARGIN_MS = 1000
-- ceil(us / 1000) in the VM's own arithmetic, as TWO52 above explains, where the calls of ceil_div
-- and max cost more than it: every strategy's new key takes its TTL from here (3% of a fixed
-- window's first decision, callgrind on Redis 7.0).
local function ttl_ms(us)
  if us < 0 then us = 0 end
  local r = us % 1000
  if r < 0 then r = r + 1000 end
  return (us - r) / 1000 + ((r > 0) and 1 or 0) + 1 + TTL_MARGIN_MS
end
-- PEXPIRE key ttl NX: a TTL for a key that has none, 1 when set. NX came with Redis 7.0 (so did
-- redis.REDIS_VERSION_NUM); an older server runs the scripts without their shebang line
-- (Script::legacy_source in include/redlimit/detail/script.hpp) and gets the same from PTTL (-1: a
-- key without a TTL): one command more, on a fixed window's first request of a window only.
local function pexpire_nx(key, ttl)
  if redis.REDIS_VERSION_NUM then return rcall('PEXPIRE', key, ttl, 'NX') end
  if rcall('PTTL', key) ~= -1 then return 0 end
  return rcall('PEXPIRE', key, ttl)
end
-- A TTL as the text redis.call() sends. Given a number, Redis would print it with "%.17g", the C
-- library's floating-point printer (2-3 times fmt()'s cost); the requests of a batch often share
-- one TTL, so the last one's text is kept.
local last_ttl, last_ttl_text = nil, nil
local function ttl_text(ms)
  if ms ~= last_ttl then last_ttl, last_ttl_text = ms, format('%d', ms) end -- fmt(), without the call
  return last_ttl_text
end

-- String states (fixed window, token and leaky buckets) are integers packed little-endian, a time
-- in 7 bytes first. Each names the configuration it was written under, so that a reconfigured
-- limit recognises a state written under another one (docs/algorithms.md, Reconfiguration):
--   fixed window: pack('<I7I6I7', start, used, window)              20 bytes
--   buckets:      pack('<I7I6I7I7I1', at, whole, frac, unit, lease) 28 bytes (lease: bucket_ttl)
-- 0.2 wrote pack2(time, quantity) ('<I7I5', or '<I7I8' past 2^40: 12 or 15 bytes) without the
-- configuration; such a state is read as written under the current one. A bucket of 27 bytes (no
-- lease) reads as one whose TTL says nothing. Any other string reads as no state.
local function unpack2(v)
  local len = #v
  if len == 12 then return unpack_('<I7I5', v) end
  if len == 15 then return unpack_('<I7I8', v) end
  return nil
end
-- The fixed window's layout (start, used, window): fixed_window.lua's decide() packs and unpacks it
-- inline, a Lua call less each way (the pack's alone was 1.6% of a batched decision's instructions,
-- callgrind on Redis 7.0).
local WINDOW = '<I7I6I7'
local function unpack_window(v, window)
  if #v == 20 then return unpack_(WINDOW, v) end
  local t, q = unpack2(v)
  if t then return t, q, window end
  return nil
end
-- The buckets' layout (at, whole, frac, unit, lease), packed inline by their decide(), as WINDOW is.
local BUCKET = '<I7I6I7I7I1'
-- Its first 20 bytes (at, whole, frac): what a write changes when the unit and the lease stay, the
-- common case of a busy subject. Written over the key's first bytes (SETRANGE, in_place above),
-- leaving its unit and lease as they are: two packed fields less, about 1% of a bucket decision's
-- instructions (callgrind on Redis 7.0: a token bucket's 24,411 to 24,136 in consume_many 128,
-- 37,657 to 37,190 alone).
local BUCKET_HEAD = '<I7I6I7'

-- A block (block.lua) of a string state lives in the state itself, so that a decision reads one
-- key, not two (the marker's read was 6% of a single fixed-window decision's instructions): the
-- state's bytes, or none, then a 9-byte suffix, pack('<I7', blocked until) and the tag 'BK'. Such
-- a value is 9, 21, 24, 29, 36 or 37 bytes long, none of them a state's own length above, so a
-- decision that finds one of those lengths in a table (a VM step, no call) has the common case,
-- no block, at no cost. split_block(v) returns the state (nil when it is the block alone) and the
-- block's end, or v and nil; a state part of no known length is dropped (it reads as no state).
local BLOCK_TAG, BLOCK_LEN = 'BK', 9
local BLOCKED = {[9] = true, [21] = true, [24] = true, [29] = true, [36] = true, [37] = true}
local STATE_LEN = {[12] = true, [15] = true, [20] = true, [27] = true, [28] = true}
local function split_block(v)
  local len = #v
  if not BLOCKED[len] or sub(v, len - 1) ~= BLOCK_TAG then return v, nil end
  local blocked_until = unpack_('<I7', v, len - BLOCK_LEN + 1)
  if len == BLOCK_LEN then return nil, blocked_until end
  return sub(v, 1, len - BLOCK_LEN), blocked_until
end
local function block_suffix(blocked_until) return pack('<I7', blocked_until) .. BLOCK_TAG end
-- A hash's block (policy.lua: a sliding window's, a policy's) is its field BLOCK_FIELD, the block's
-- end (us) in decimal: a name without ':', so never a bucket's, and read by the HGETALL a decision
-- makes anyway.
local BLOCK_FIELD = 'blk'
-- The sliding log's block (sliding_log.lua) is a member of its sorted set, BLOCK_MEMBER followed by
-- the block's end (us) in decimal, scored +inf: above every entry, so the read of the newest entry
-- that a decision makes anyway returns it whenever it is there. No entry starts with '~' (a text
-- entry starts with a digit, a compact one with a byte below '0'). block_end(m): the end of the
-- block member `m`, or nil for any other member.
local BLOCK_MEMBER = '~blk:'
local function block_end(m)
  if sub(m, 1, 5) ~= BLOCK_MEMBER then return nil end
  return tonumber(sub(m, 6))
end

-- A block of a fixed window (block.lua, kind "3") also takes WINDOW_BLOCKED off every count its hash
-- holds (fixed_window.lua): a count below zero is the block, seen by the HINCRBY a decision makes
-- anyway, so that no decision reads BLOCK_FIELD until then. 2^50: above any count (< 2^40) and its
-- requests' costs, and a count less it stays exact in a double.
local WINDOW_BLOCKED = 1125899906842624
-- A fixed window's count field (fixed_window.lua): "<start>:<window>" in decimal us, and back (nil,
-- nil for any other name), as fixed_window.lua and block.lua both read and write it.
local function window_field(start, window) return fmt(start) .. ':' .. fmt(window) end
local function split_window_field(f)
  local s, w = match(f, '^(%d+):(%d+)$')
  if not s then return nil, nil end
  return tonumber(s), tonumber(w)
end

-- A hash field's name "<tag>:<bucket>" (policy.lua): its tag and bucket, or nil for any other name.
local function split_field(f)
  local tag, idx = match(f, '^([^:]*):(%d+)$')
  if not tag then return nil, nil end
  return tag, tonumber(idx)
end

-- A policy's tag: its window and precision in us ("1h@1m", "90s"), as the client writes them with
-- format_duration (include/redlimit/impl/limit-inl.hpp). nil for anything else. A hash's field is
-- "<tag>:<bucket>" (policy.lua).
local unit_us = {d = 86400000000, h = 3600000000, m = 60000000, s = 1000000, ms = 1000, us = 1}
local function parse_tag(tag)
  local wn, wu, pn, pu = match(tag, '^(%d+)(%a+)@(%d+)(%a+)$')
  if not wn then
    wn, wu = match(tag, '^(%d+)(%a+)$')
    pn, pu = wn, wu
  end
  local a, b = unit_us[wu], unit_us[pu]
  if not (a and b) then return nil end
  return tonumber(wn) * a, tonumber(pn) * b
end

-- A policy's limits (policy.lua: its params, split by words()), checked as the client writes them
-- (param, above): 1 to MAX_LIMITS of them, each of at most MAX_BUCKETS buckets and all of them of
-- MAX_BUCKETS together (a decision reads every live one), named by a tag that says its window and
-- precision, no two of the same window and precision (Policy::max_limits, Policy::max_buckets,
-- SlidingWindow::max_buckets, checked_policy in include/redlimit/impl/strategies-inl.hpp). A tag
-- that said another precision would read one limit's buckets as another's, up to 10^9 intervals
-- apart. Returns the limits in order, each {tag, limit, P, n, span}, and the same by tag.
local MAX_LIMITS, MAX_BUCKETS = 16, 10000
local function parse_limits(p)
  local m = param(p, 1, 1, MAX_LIMITS, 'the number of limits')
  param_words(p, 1 + 4 * m, format('a policy of %d limits', m))
  local list, tags, seen, buckets = {}, {}, {}, 0
  for i = 1, m do
    local base = 2 + 4 * (i - 1)
    local tag, limit = p[base], param(p, base + 1, 1, MAX_COUNT, 'limit')
    local w = param(p, base + 2, 1, MAX_WINDOW, 'window')
    local P = param(p, base + 3, 1, w, 'precision')
    local tw, tP = parse_tag(tag)
    local named = fmt(w) .. '@' .. fmt(P)
    if w % P ~= 0 or w / P > MAX_BUCKETS or tw ~= w or tP ~= P or seen[named] then
      error(format('redlimit: policy limit %d ("%s %s %s %s") needs a tag that names its window and precision, '
        .. 'a precision that divides the window into at most %d buckets, and a window and precision of its own',
        i, tag, p[base + 1], p[base + 2], p[base + 3], MAX_BUCKETS), 0)
    end
    seen[named] = true
    local n = w / P
    buckets = buckets + n
    if buckets > MAX_BUCKETS then
      error(format('redlimit: a policy of more than %d buckets in all (%d by limit %d)', MAX_BUCKETS, buckets, i), 0)
    end
    list[i] = {tag = tag, limit = limit, P = P, n = n, span = (n + 1) * P}
    tags[tag] = list[i]
  end
  return list, tags
end
-- What a write of a blocked state (a refund: nothing else writes during a block) becomes: the new
-- state with the block kept, and a TTL that outlives the block (0 keeps the key's, which block.lua
-- made to). A delete leaves the block alone.
local function keep_block(new, ttl, blocked_until)
  if ttl == 0 then return new .. block_suffix(blocked_until), 0 end
  ttl = max(ttl or 0, ttl_ms(blocked_until - now))
  if new then return new .. block_suffix(blocked_until), ttl end
  return block_suffix(blocked_until), ttl
end

-- A bucket's level is `whole` units of capacity (tokens, or requests of water) and `frac` ticks of
-- the next one: level = whole * unit + frac ticks, 0 <= frac < unit, where the rate moves `per`
-- ticks a microsecond (token_bucket.lua). Neither part grows with the product capacity * unit,
-- which passes 2^53 for big capacities at rates like 7 per 3 days.
-- read_bucket returns the stored level at `now` (at most `cap` whole units), or `missing` at now
-- without a state; t0, the later of now and `at` (a client whose clock runs ahead wrote it:
-- nothing moves backwards), and ahead = t0 - now, which the waits returned include; and the
-- state's lease (bucket_ttl below), nil when it has none. A state written under
-- another unit (the rate changed) keeps its whole units, and its ticks are rescaled to the new unit,
-- rounded towards the fuller bucket (`round_up` for water, down for tokens): never more room.
-- token_bucket.lua and leaky_bucket.lua inline its common cases.
local function read_bucket(now, v, missing, cap, unit, round_up)
  local whole, frac, at, lease = missing, 0, now, nil
  if v then
    local len = #v
    if len == 28 or len == 27 then
      local t, w, f, u
      if len == 28 then t, w, f, u, lease = unpack_(BUCKET, v) else t, w, f, u = unpack_('<I7I6I7I7', v) end
      -- No client writes a unit of 0, or ticks of a whole unit or more (their rescaled ticks ran to
      -- 2^100, and a lease past 2^62 us): another program's bytes, read as no state.
      if u == 0 or f >= u then
        t, w, f, lease = now, missing, 0, nil
      elseif u ~= unit then
        local q, r = muldiv(f, unit, u)
        if round_up and r > 0 then q = q + 1 end
        f = q
        if f >= unit then w, f = w + 1, f - unit end
      end
      whole, frac, at = w, f, t
    else
      local t, l = unpack2(v)
      if t then whole, frac, at = floor_div(l, unit), fmod(l, unit), t end
    end
    if whole >= cap then whole, frac = cap, 0 end
  end
  if at > now then return whole, frac, at, at, at - now, lease end
  return whole, frac, at, now, 0, lease
end

-- A bucket's TTL. Setting a TTL costs Redis about a microsecond a write more than keeping one
-- (PSETEX against SET KEEPTTL: Redis rewrites a relative TTL for propagation), a quarter of a
-- batched decision's time, so a busy bucket sets its TTL now and then and keeps it in between.
-- The state's last byte, its lease, says how long the key lives: with p = 2^(20 + lease % 32) us
-- and m = floor(lease / 32) + 1, the write that set the TTL, in the period [k p, (k + 1) p) where
-- k = floor(at / p), gave the key until (k + 1 + m) p, plus ttl_ms's margin. A later write of the
-- same period keeps `at` in it, so the claim carries over: that write keeps the TTL if its own
-- state stops mattering by then (t0 + need; need = the time to full, or to empty). Any other
-- write takes a new lease: p the smallest power of two of at least 2^20 us (1.05 s) with
-- 8 p >= need, and m = ceil(need / p) (1 to 8), so the key lives from need to need + 2 p past t0:
-- under 1.5 times what today's state needs when that is over 8 periods of the floor (8.4 s), at
-- most need + 2.1 s below, and at least a second (a test's clock held still while real time
-- passes still finds its keys). A bucket drained or refilled by many writes takes
-- a new lease when its need outgrows the old one, or a period (need / 8 or more) has passed.
-- Like every TTL here the lease mixes the writer's clock with Redis's: ttl_ms's margin covers
-- clients up to a second apart. Whether a write keeps its lease is tested inside the buckets'
-- decide() (lua/parts/bucket_write.lua, which sets ttl 0: SET KEEPTTL or SETRANGE); bucket_ttl(t0,
-- need) takes a new one, and returns the TTL for PSETEX and the lease.
local LEASE_MIN_LOG2 = 20
local LEASE_PERIOD = {}
for e = 0, 31 do LEASE_PERIOD[e] = 2 ^ (LEASE_MIN_LOG2 + e) end
-- lease_span(at, lease): the end of the period of the write that took the lease, and the end of the
-- life it gave the key (bucket_ttl, below).
local function lease_span(at, lease)
  local e = lease % 32
  local p = LEASE_PERIOD[e]
  local next_period = at - at % p + p
  return next_period, next_period + ((lease - e) / 32 + 1) * p
end
local function bucket_ttl(t0, need)
  -- A new lease, in the VM's own arithmetic (p is a power of two, so every % and / below is
  -- exact): a subject seen once a period or less often takes this path every time, where the calls
  -- of ceil_div, floor_div and max, and 2^20 through pow, cost more than the arithmetic.
  local p, e = LEASE_PERIOD[0], 0
  while 8 * p < need do p, e = 2 * p, e + 1 end
  local r = need % p
  local m = (need - r) / p + ((r > 0) and 1 or 0)
  if m < 1 then m = 1 end
  -- ttl_ms(us), written out: a new key's write makes this call (a new state's decision), and a
  -- call less is 1% of it. us > 0 (t0 >= now, and (1 + m) p > t0 % p).
  local us = t0 - t0 % p + (1 + m) * p - now
  r = us % 1000
  return (us - r) / 1000 + ((r > 0) and 1 or 0) + 1 + TTL_MARGIN_MS, e + 32 * (m - 1)
end

-- Microseconds until a rising level (whole, frac) reaches `target` whole units (target >= whole), at
-- `per` ticks a microsecond: ceil(((target - whole) * unit - frac) / per), with muldiv for the
-- product. With (target - whole) * unit = q * per + r this is q + ceil((r - frac) / per).
local function time_to(target, whole, frac, unit, per)
  local q, r = muldiv(target - whole, unit, per)
  local d = r - frac
  if d > 0 then return q + ceil_div(d, per) end
  return q - floor_div(-d, per)
end
