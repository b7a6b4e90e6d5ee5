-- Prologue: the start of every call of every script in this folder, behind helpers.lua, and
-- epilogue.lua appended to those that define decide() (cmake/embed_lua.cmake), so the shared
-- conventions live in one place. A script's decide() judges one request; the epilogue runs the
-- call's requests through it. As a Redis Function, this prologue, a script's per-call part and
-- the epilogue's are the function (KEYS and ARGV are its arguments); helpers.lua and the load parts
-- run once, at load.
--
-- One call decides n >= 1 requests of one strategy, in order (consume_many sends many):
-- KEYS[i]     request i's state, for one (resource, subject), which holds the subject's block
--             (helpers.lua: split_block, BLOCK_FIELD, BLOCK_MEMBER); block.lua, which writes it,
--             takes the block marker too (its own KEYS)
-- ARGV[1]  now: microseconds since the Unix epoch from the client's clock, an integer in
--          [0, 2^53), or "redis" to read Redis TIME here (one clock for every client, no extra
--          round trip); one now for all n
-- ARGV[2]  the head: "<mode> <cost> <parameters>", space-separated (helpers.lua, read_head):
--          mode: "1" consume (record if admitted), "0" peek (record nothing), "2" refund,
--            "3" block (block.lua only), "4" consume a batch whose requests' keys are all
--            distinct: the client's promise, which spares the epilogue its table of the values it
--            wrote (`written`: about 580 instructions of a batched decision's, callgrind on 7.0);
--          cost: request 1's, units to take, or to give back when refunding (>= 1, checked by the
--            client);
--          parameters: the strategy's, named in each script (block.lua's are its own)
-- ARGV[3 .. 2 + n - 1]  the costs of requests 2..n: none when n = 1, or when every request costs
--          what request 1 does (the common case, and 0.1-0.2 us of Redis's time a request less)
-- Returns request 1's decision when n = 1, otherwise the n decisions one after the other: five
-- integers each (a policy's 6 + 2m), or fewer for an admission that waits for nothing (epilogue.lua,
-- reply).
-- On a Redis Cluster a call may hold requests of many slots of one node: the Functions library's
-- <name>_spread function (cmake/embed_lua.cmake) takes FCALL's one declared key (the first
-- request's state, which routes the call) and its arguments: the number of keys, the keys (KEYS
-- above), then ARGV as above; it rebuilds KEYS and ARGV and sets `spread` (helpers.lua). Over
-- EVALSHA on a server older than 7.0, spread_eval.lua does the same before this prologue.
if not fmod then bind_libraries() end -- helpers.lua
-- now, mode, cost1, cost1_arg, params, record, refund: helpers.lua
if ARGV[1] == 'redis' then
  if redis.replicate_commands then redis.replicate_commands() end -- Redis < 5: allow writes after TIME
  local t = rcall('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = ARGV[1] + 0 -- Lua's coercion runs strtod once, where tonumber() runs it twice
  -- The client sends whole microseconds since 1970; a raw call may send any number strtod reads.
  -- NaN, an infinity or 1e300 made a policy write a hash it then could not give a TTL; a fraction
  -- or a time past 2^53 is no time the integer math (helpers.lua) holds exactly. NaN fails `>=`.
  if not (now >= 0 and now < TWO53 and now % 1 == 0) then
    error('redlimit: now (ARGV[1]) is not a whole number of microseconds in [0, 2^53): ' .. ARGV[1], 0)
  end
end
if ARGV[2] ~= head_arg then read_head(ARGV[2]) end -- sets mode, cost1, cost1_arg, params, record, refund
