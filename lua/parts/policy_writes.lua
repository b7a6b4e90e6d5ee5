-- The policy script's writes and waits (lua/policy.lua includes this part where its line "-- Part:"
-- names it: cmake/embed_lua.cmake): own (adopted counts written as the limit's), give_back (a
-- refund), take (an admission), retry_after and own_reset (a limit's wait and its reset), and
-- conclude (the decision's reply, its writes and the key's TTL). Apart so that policy.lua stays
-- the state, its reading and the general decision; these use its locals (limits, counts_of,
-- buckets_with_units, weighted...), as one text.

-- Adopted counts become the limit's own fields before the limit's first write.
local function own(key, l)
  if not l.adopted then return end
  for i, c in pairs(l.counts) do rcall('HINCRBY', key, l.tag .. ':' .. fmt(i), fmt(c)) end
  l.adopted = false
end

local function give_back(key, cost)
  for _, l in ipairs(limits) do
    own(key, l)
    local counts = counts_of(l)
    local left = cost
    local held = buckets_with_units(counts, l.oldest - 1) -- taken from the newest down
    for j = #held, 1, -1 do
      if left <= 0 then break end
      local idx = held[j]
      local c = counts[idx]
      local take = min(c, left)
      if idx == l.oldest then l.old = l.old - take else l.full = l.full - take end
      counts[idx] = c - take
      if c == take then
        rcall('HDEL', key, l.tag .. ':' .. fmt(idx))
      else
        rcall('HINCRBY', key, l.tag .. ':' .. fmt(idx), fmt(-take))
      end
      left = left - take
    end
    l.newest = nil
    for i, c in pairs(counts) do
      if c > 0 and (not l.newest or i > l.newest) then l.newest = i end
    end
    l.used = l.full + weighted(l, l.old)
  end
end

-- One HSET for every limit's current bucket (their new counts, known from the HGETALL and the
-- batch so far) rather than an HINCRBY a limit: one command whatever the number of limits.
local fields = {} -- the HSET's arguments, kept from call to call (m limits: 2m of them; decide_policy too)
local function take(key, cost, stale)
  for i = 1, #limits do
    local l = limits[i]
    if l.adopted then own(key, l) end
    local b, newest = l.b, l.newest
    local c = l.cur + cost
    l.used, l.cur = l.used + cost, c
    if l.counts then l.counts[b] = c end
    fields[2 * i - 1] = l.field
    fields[2 * i] = text_of[c] or count_text(c)
    if not newest or b > newest then l.newest = b end
  end
  if #limits == 1 then
    rcall('HSET', key, fields[1], fields[2]) -- a sliding window: no unpack()
  else
    rcall('HSET', key, unpack(fields, 1, 2 * #limits))
  end
  if not stale then return end
  for i = 1, #stale, 1000 do -- unpack() has a stack limit: delete in slices
    rcall('HDEL', key, unpack(stale, i, min(i + 999, #stale)))
  end
end

-- Earliest time a limit has room for `cost`: walk forward one bucket interval at a time. During
-- [(b+k)P, (b+k+1)P) bucket b+k-n is the weighted one and `s` units sit in the buckets after it.
-- With x = limit - s - cost, the request fits d microseconds into the interval when
-- ceil(o * (P - d) / P) <= x, i.e. o * (P - d) <= x * P: at once when x >= o, otherwise from
-- d = P - floor(x * P / o) (muldiv: x * P may pass 2^53). The first interval with d < P wins.
-- Past bucket b + 1 (k > n + 1) only buckets a client whose clock runs ahead wrote are left, and
-- they may lie any distance ahead: a clock a year ahead, at P = 1 s, put 3 * 10^7 intervals between
-- them, a walk that held Redis for seconds. An interval whose weighted bucket is empty changes
-- neither s nor x, so while x < 0 the walk jumps from there to the next bucket with units (`ahead`,
-- sorted when the walk first gets there): at most two steps a bucket.
local function retry_after(l, cost)
  local counts = counts_of(l)
  local b, n = l.b, l.n
  local s, k, last = l.full, 0, max(l.newest or b, b) - b + n + 1
  local ahead, i -- the buckets past b + 1 with units, in order; the next one's place
  while k <= last do
    local o = counts[b + k - n] or 0
    if k > 0 then s = s - o end
    local x = l.limit - s - cost
    if x >= 0 then
      local d = 0
      if x < o then d = l.P - muldiv(x, l.P, o) end
      if k == 0 then d = max(d, l.r) end
      if d < l.P then return (b + k) * l.P + d - now end
    end
    k = k + 1
    if x < 0 and k > n + 1 and not counts[b + k - n] then
      if not ahead then ahead, i = buckets_with_units(counts, b + 1), 1 end
      while ahead[i] and ahead[i] < b + k - n do i = i + 1 end
      if not ahead[i] then break end
      k = ahead[i] - b + n
    end
  end
  return 0 -- not reached when cost <= limit: the last interval has an empty weighted bucket
end

-- A limit's own reset_after (general()): until its newest bucket stops weighing anything, at
-- (newest + n + 1) * P; 0 when it has none.
local function own_reset(l)
  if not l.newest then return 0 end
  local t = (l.newest + l.n + 1) * l.P - now
  if t < 0 then return 0 end
  return t
end

-- remaining and reset_after of every limit, in order: conclude()'s `each`, kept from call to call
-- (the epilogue copies what it keeps past the next decision).
local each_out = {}

-- The deciding limit: when rejected, the one that makes the caller wait longest (at that time
-- all of them have room: usage only falls while nothing is admitted); when admitted, the first one
-- with the least quota left. An admission's remaining is the least of the limits', its reset_after
-- the latest, its retry and delay 0: all of it follows from `each`, which is all its reply holds
-- (detail::decode_decision takes them back the same way).
-- `renew`: a refund that wrote another limit's adopted counts under this one's tags (own): they now
-- live by these limits, not by the TTL the key got under the old ones, which may be far shorter.
local function conclude(key, cost, allowed, held, renew)
  local remaining, retry, reset, decider = nil, 0, 0, 1
  local each, packed = each_out, allowed and packable and 0 -- (packable, above)
  for i = 1, #limits do
    local l = limits[i]
    local rem = l.limit - l.used
    if rem < 0 then rem = 0 end
    if packed then
      if l.newest ~= l.b or rem > l.limit then packed = nil else packed = packed + rem * l.scale end
    end
    local wait = 0
    if not allowed and not l.allowed then wait = retry_after(l, cost) end
    local lr = own_reset(l)
    each[2 * i - 1] = rem
    each[2 * i] = lr
    if lr > reset then reset = lr end
    if allowed then
      if not remaining or rem < remaining then decider = i end
    elseif wait > retry then
      decider = i
    end
    if not remaining or rem < remaining then remaining = rem end
    if wait > retry then retry = wait end
  end
  if renew and reset > 0 then
    local life = reset
    if blocked_until and blocked_until - now > life then life = blocked_until - now end -- a block's too
    rcall('PEXPIRE', key, ttl_text(ttl_ms(life)))
  elseif allowed and record and reset > 0 and not (held and held >= now + reset) then
    -- Bucket `newest` stops weighing anything at (newest + n + 1) * P: when every limit's has, the
    -- hash is all stale, at now + reset. Unless that moved past `held` (general()), the write that
    -- last moved it set the TTL this one would (a refund never lengthens it): setting it again cost
    -- Redis 1.4 us of a sliding window's 8.8 a call (measured on 7.0), and a policy's second-long
    -- limit, turning over under its hour-long one, would set it on most decisions.
    rcall('PEXPIRE', key, ttl_text(ttl_ms(reset)))
  end
  return allowed and 1 or 0, remaining, retry, reset, 0, decider, nil, nil, each, packed
end
