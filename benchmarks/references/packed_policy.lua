#!lua name=redlimit_packed_policy_reference
-- A measuring reference, not part of redlimit: a policy's common path (every limit has room, a
-- consume) on a packed string state instead of lua/policy.lua's hash, to weigh that redesign with
-- scripts/instructions.sh (the strategy packed_policy, beside policy_live under the same load). It
-- does none of the rest (blocks, cost checks, rejections and their waits, refunds, reconfiguration),
-- so its figure is a floor for such a state, not a version of the script.
--
-- KEYS[1]  the state: for each limit in order, k (I1) then k pairs (bucket I7, count I6), oldest
--          first: the buckets of the limit's window that hold units
-- ARGV[1]  now (us); ARGV[2] "1 <cost> <m>" then "<tag> <limit> <window us> <precision us>" per limit,
--          policy.lua's head
-- Returns each limit's remaining and reset_after (us), policy.lua's reply for such an admission.
--
-- Time math, as policy.lua's: P the precision, n = window / P, b = floor(now / P) the current bucket,
-- r = now - b * P; buckets b - n + 1 .. b count whole and bucket b - n (`old`) weighs
-- old - floor(old * r / P). Buckets before b - n are dropped at the write. The key lives until its
-- newest bucket stops weighing: (b + n + 1) * P; the TTL is written again only when that moves.
local unpack_, pack, floor, rep, gmatch, concat, sformat -- bound at the first call (Redis 7.0 loads
-- a library with `redis` alone in reach)
local head_arg, limits, cost
local out, vals, layouts = {}, {}, {}

local function parse(head)
  local w = {}
  for x in gmatch(head, '%S+') do w[#w + 1] = x end
  cost = tonumber(w[2])
  limits = {}
  for i = 1, tonumber(w[3]) do
    local j = 3 + 4 * (i - 1)
    local P = tonumber(w[j + 4])
    local n = tonumber(w[j + 3]) / P
    limits[i] = {limit = tonumber(w[j + 2]), P = P, n = n, span = (n + 1) * P, idx = {}, cnt = {}}
  end
  head_arg = head
end

-- The format of a state whose limits hold k_1 .. k_m pairs, `code` = sum of k_i * 256^(i-1).
local function layout(code)
  local f = layouts[code]
  if f then return f end
  local parts, x = {'<'}, code
  for _ = 1, #limits do
    parts[#parts + 1] = 'I1' .. rep('I7I6', x % 256)
    x = floor(x / 256)
  end
  f = concat(parts)
  layouts[code] = f
  return f
end

redis.register_function('packed_policy', function(keys, args)
  if not unpack_ then
    unpack_, pack, floor, rep = struct.unpack, struct.pack, math.floor, string.rep
    gmatch, concat, sformat = string.gmatch, table.concat, string.format
  end
  local now = args[1] + 0
  if args[2] ~= head_arg then parse(args[2]) end
  local key = keys[1]
  local v = redis.pcall('GET', key)
  local len = v and #v or 0 -- (an error table's length is 0: no state)
  local pos, held, m = 1, 0, #limits
  for i = 1, m do -- read each limit's pairs, keep the live ones, judge
    local l = limits[i]
    local P = l.P
    local r = now % P
    local b = (now - r) / P
    local oldest = b - l.n
    local full, old, cur, k, stored = 0, 0, 0, 0, 0
    local idx, cnt = l.idx, l.cnt
    if len > 0 then stored, pos = unpack_('<I1', v, pos) end
    for _ = 1, stored do
      local x, c
      x, c, pos = unpack_('<I7I6', v, pos)
      local ends = x * P + l.span -- (the TTL the last write gave)
      if ends > held then held = ends end
      if x >= oldest then
        if x == oldest then old = c else full = full + c end
        if x == b then cur = c else k = k + 1 idx[k], cnt[k] = x, c end
      end
    end
    local used = full
    if old > 0 then used = used + old - floor(old * r / P) end
    if used + cost > l.limit then return {0, 0, 1, 1, 0} end -- (the reference's load never gets here)
    k = k + 1
    idx[k], cnt[k] = b, cur + cost
    l.k, l.used, l.b = k, used + cost, b
  end
  local nv, code, reset = 0, 0, 0
  for i = m, 1, -1 do code = code * 256 + limits[i].k end
  for i = 1, m do -- the new state's values, and the reply
    local l = limits[i]
    local idx, cnt = l.idx, l.cnt
    nv = nv + 1
    vals[nv] = l.k
    for j = 1, l.k do
      vals[nv + 1], vals[nv + 2] = idx[j], cnt[j]
      nv = nv + 2
    end
    local own = l.b * l.P + l.span - now
    out[2 * i - 1], out[2 * i] = l.limit - l.used, own
    if own > reset then reset = own end
  end
  out[2 * m + 1] = nil
  local new = pack(layout(code), unpack(vals, 1, nv))
  if #new == len and held >= now + reset then
    redis.call('SETRANGE', key, '0', new) -- in place: the TTL holds
  else
    redis.call('PSETEX', key, sformat('%d', floor(reset / 1000) + 1), new)
  end
  return out
end)
