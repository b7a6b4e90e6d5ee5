-- The policy script's common paths (decide_window, fresh, decide_policy: lua/parts/policy_common.lua) against its
-- general() decision, in Lua itself: the Functions library is loaded twice into a stand-in for
-- Redis, once as built and once with every decision sent to general(), and both run the same random
-- traces. Every reply (or error) and the whole store, TTLs included, must be the same after every
-- call. The C++ differential test (tests/integration/differential_test.cpp) holds the memory twin
-- to the script through a real Redis; this one reaches the shapes that test rarely makes: stale and
-- skewed buckets, blocks and foreign fields met on a common path, batches with repeated subjects,
-- time jumping back, a clock a year ahead (whose buckets a rejection's wait and a refund must reach
-- in a few steps: every call runs under a budget of Lua instructions), limiters changing their limits.
--
--   lua5.1 common_path_test.lua <generated lua_sources.hpp> [seeds] [steps a seed]
--
-- The stand-in runs each command on Lua tables: a hash is a table of strings, a key of another type
-- the string 'junk' (HGETALL answers it as Redis's pcall does, a table with `err`). PEXPIRE is
-- recorded per key with the call's clock, and a key written and left without one fails the run: the
-- library may never leave a key without a TTL.

local header, seeds, steps = arg[1], tonumber(arg[2] or 6), tonumber(arg[3] or 10000)
assert(header, 'usage: lua5.1 common_path_test.lua <lua_sources.hpp> [seeds] [steps]')

-- The library's text: the raw string `library` of the generated header (cmake/embed_lua.cmake).
local function library_text()
  local f = assert(io.open(header, 'rb'))
  local text = f:read('*a')
  f:close()
  local open = 'library = R"redlimit_lua('
  local s = text:find(open, 1, true)
  assert(s, header .. ': no library')
  local e = text:find(')redlimit_lua"', s, true)
  return text:sub(s + #open, e - 1)
end

-- The two builds. The selection line must be there exactly once, or this test would compare the
-- library with itself; general() counts its calls, so the run can show the common paths were taken.
local SELECT = 'decide = not refund and (#limits == 1 and decide_window or decide_policy) or general'
local function variants()
  local text = library_text()
  local counted = text:gsub('\nfunction general%(key, cost, h%)\n', '%0  general_calls = general_calls + 1\n', 1)
  assert(counted ~= text, 'policy.lua: general() moved')
  local s, e = counted:find(SELECT, 1, true)
  assert(s and not counted:find(SELECT, e + 1, true), 'policy.lua: the common paths\' selection line moved')
  local forced = counted:sub(1, s - 1) .. 'decide = general' .. counted:sub(e + 1)
  return counted, forced
end

-- A stand-in Redis over `store` (key -> hash table or 'junk') and `ttl` (key -> the ms last set).
local function stand_in(store, ttl)
  local cmds = {}
  local function hash(k)
    local h = store[k]
    if h == nil then
      h = {}
      store[k] = h
      ttl[k] = nil -- a new key has no TTL until one is set
    end
    assert(type(h) == 'table', 'WRONGTYPE write to ' .. k)
    return h
  end
  function cmds.HGETALL(k)
    local h = store[k]
    if type(h) == 'string' then return {err = 'WRONGTYPE Operation against a key holding the wrong kind of value'} end
    local names, out = {}, {}
    for f in pairs(h or {}) do names[#names + 1] = f end
    table.sort(names) -- Redis gives no order: the scripts may not depend on one
    for _, f in ipairs(names) do
      out[#out + 1] = f
      out[#out + 1] = h[f]
    end
    return out
  end
  function cmds.HSET(k, ...)
    local h, a = hash(k), {...}
    assert(#a > 0 and #a % 2 == 0, 'HSET arity')
    for i = 1, #a, 2 do
      assert(type(a[i + 1]) == 'string', 'HSET of a non-string value')
      h[a[i]] = a[i + 1]
    end
    return #a / 2
  end
  function cmds.HINCRBY(k, f, d)
    local h = hash(k)
    local v = (tonumber(h[f]) or 0) + tonumber(d)
    h[f] = string.format('%d', v)
    return v
  end
  function cmds.HDEL(k, ...)
    local h = store[k]
    if type(h) ~= 'table' then return 0 end
    for _, f in ipairs({...}) do h[f] = nil end
    if next(h) == nil then store[k], ttl[k] = nil, nil end
    return 1
  end
  function cmds.PEXPIRE(k, ms)
    assert(type(ms) == 'string' and ms:match('^%d+$'), 'PEXPIRE of ' .. tostring(ms))
    if store[k] == nil then return 0 end
    ttl[k] = ms
    return 1
  end
  function cmds.DEL(k)
    store[k], ttl[k] = nil, nil
    return 1
  end
  local function call(c, ...)
    local f = cmds[c]
    if not f then error('the stand-in has no ' .. tostring(c)) end
    return f(...)
  end
  return {call = call, pcall = call}
end

-- A build loaded into an environment of its own: its `redis`, its store, its policy function.
local function load(text)
  local store, ttl, fns = {}, {}, {}
  local env = setmetatable({general_calls = 0}, {__index = _G})
  env.redis = stand_in(store, ttl)
  env.redis.register_function = function(a, b)
    if type(a) == 'table' then fns[a.function_name] = a.callback else fns[a] = b end
  end
  env.struct = {pack = function() error('a policy packs nothing') end, unpack = function() error('nor unpacks') end}
  local chunk = assert(loadstring((text:gsub('^#![^\n]*', '')), 'library'))
  setfenv(chunk, env)
  chunk()
  local fn
  for name, f in pairs(fns) do
    if name:match('_policy$') then fn = f end
  end
  assert(fn, 'the library registers no policy function')
  return {fn = fn, store = store, ttl = ttl, env = env}
end

local function serialise(ok, reply)
  if not ok then return 'error: ' .. tostring(reply):gsub('^.-:%d+: ', '') end
  if type(reply) ~= 'table' then return tostring(reply) end
  local out = {} -- up to the first nil, where Redis stops reading a reply (epilogue.lua, reply)
  while reply[#out + 1] ~= nil do out[#out + 1] = tostring(reply[#out + 1]) end
  return table.concat(out, ',')
end
local function dump(b)
  local lines = {}
  for k, v in pairs(b.store) do
    if type(v) == 'table' then
      for f, x in pairs(v) do lines[#lines + 1] = k .. '/' .. f .. '=' .. x end
      lines[#lines + 1] = k .. ' ttl=' .. tostring(b.ttl[k])
    else
      lines[#lines + 1] = k .. '=' .. v
    end
  end
  table.sort(lines)
  return table.concat(lines, '\n')
end

-- Limiters as the client sends them (a policy's params: m, then tag, limit, window, precision in us).
local PARAMS = {
  '1 1s 5 1000000 1000000', -- a sliding window, precision = window
  '1 10s@1s 20 10000000 1000000', -- ten buckets
  '1 10s@2s 20 10000000 2000000', -- the same window at another precision: adopts the first's buckets
  '3 1s 5 1000000 1000000 1m 12 60000000 60000000 1h@1m 40 3600000000 60000000',
  '2 1s@250ms 3 1000000 250000 1m 8 60000000 60000000',
  '1 2m@1s 50 120000000 1000000', -- 120 buckets: more than STALE_MAX (64) go stale at once
  '2 1m 12 60000000 60000000 1s 5 1000000 1000000', -- the least limit second: it decides
}
local SUBJECTS = {'p:a', 'p:b', 'p:c'}

-- One random call: its keys and arguments (prologue.lua), with the clock moved.
local clock = 1795000000000000
local params = PARAMS[1]
local function next_call()
  if math.random() < 0.01 then params = PARAMS[math.random(#PARAMS)] end
  local jump = math.random()
  if jump < 0.6 then clock = clock + math.random(0, 50000)
  elseif jump < 0.85 then clock = clock + math.random(0, 1500000)
  elseif jump < 0.95 then clock = clock + math.random(0, 70000000)
  elseif jump < 0.997 then clock = clock - math.random(0, 2000000) -- another client's clock, behind
  else -- a clock up to a year ahead, or back from one: a rejection's wait walks to its buckets
    clock = clock + (math.random() < 0.5 and 1 or -1) * math.floor(math.random() * 31536000000000)
  end
  local mode = ({'1', '1', '1', '1', '0', '2', '1', '4'})[math.random(8)]
  local n = (mode == '4' or math.random() < 0.15) and math.random(1, 5) or 1
  local keys, seen = {}, {}
  for _ = 1, n do
    local k = SUBJECTS[math.random(#SUBJECTS)]
    if mode ~= '4' or not seen[k] then keys[#keys + 1], seen[k] = k, true end -- mode 4: distinct
  end
  local cost = math.random(1, 3)
  local argv = {string.format('%d', clock), mode .. ' ' .. cost .. ' ' .. params}
  if #keys > 1 and math.random() < 0.3 then -- costs of their own, from the second request on
    for i = 2, #keys do argv[#argv + 1] = tostring(math.random(1, 3)) end
  end
  return keys, argv
end

-- Now and then, the same thing written into both stores: a block, a foreign field, a foreign type.
local function disturb(builds, key)
  local what = math.random(3)
  local block_end = string.format('%d', clock + math.random(0, 3000000))
  for _, b in ipairs(builds) do
    if what == 3 then
      b.store[key], b.ttl[key] = 'junk', nil
    else
      local h = b.store[key]
      if type(h) ~= 'table' then h = {} b.store[key] = h end
      h[what == 1 and 'blk' or '9m:123'] = what == 1 and block_end or '4'
      b.ttl[key] = b.ttl[key] or '100000' -- as block.lua sets it
    end
  end
end

-- A call, as pcall makes it, that may run at most CALL_BUDGET Lua instructions: Redis runs a script
-- alone, so no call may hold it long. The longest call of these traces runs about 13,000; a walk of
-- one step a bucket interval to a bucket a year ahead, as the wait made before it jumped, ran
-- about 4 * 10^8.
local CALL_BUDGET = 2000000
local function bounded(where, fn, keys, argv)
  local over = false
  debug.sethook(function()
    over = true
    error('past the budget', 0)
  end, '', CALL_BUDGET)
  local results = {pcall(fn, keys, argv)}
  debug.sethook()
  if over then error(where .. '\n  a call ran past ' .. CALL_BUDGET .. ' Lua instructions', 0) end
  return unpack(results, 1, 2)
end

local common, forced = variants()
local decisions, general_total = 0, 0
for seed = 1, seeds do
  math.randomseed(seed)
  clock, params = 1795000000000000, PARAMS[1]
  local a, b = load(common), load(forced)
  for step = 1, steps do
    local keys, argv = next_call()
    if math.random() < 0.005 then disturb({a, b}, keys[1]) end
    local where = string.format('seed %d step %d: keys %s, ARGV %s', seed, step, table.concat(keys, ' '),
                                table.concat(argv, ' | '))
    local ra = serialise(bounded(where, a.fn, {unpack(keys)}, {unpack(argv)}))
    local rb = serialise(bounded(where, b.fn, {unpack(keys)}, {unpack(argv)}))
    if ra ~= rb then error(where .. '\n  common paths: ' .. ra .. '\n  general():    ' .. rb, 0) end
    local da, db = dump(a), dump(b)
    if da ~= db then error(where .. '\n  common paths:\n' .. da .. '\n  general():\n' .. db, 0) end
    for k, v in pairs(a.store) do
      if type(v) == 'table' and not a.ttl[k] then error(where .. '\n  ' .. k .. ' has no TTL:\n' .. da, 0) end
    end
    decisions = decisions + #keys
  end
  general_total = general_total + a.env.general_calls
  assert(b.env.general_calls > 0, 'the forced build never called general()')
end

-- The common paths must have decided most requests, or this compared general() with itself; and
-- general() must have taken some from them (rejections, refunds, blocks), or their hand-over went
-- untested.
local share = 1 - general_total / decisions
print(string.format('%d requests over %d seeds: the same replies and stores; %.0f%% decided on a common path',
                    decisions, seeds, 100 * share))
assert(share > 0.25, 'the common paths decided too few requests')
assert(general_total > 0.05 * decisions, 'general() decided too few requests')
