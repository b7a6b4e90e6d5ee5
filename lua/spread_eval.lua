-- Spread over EVALSHA: the start of the EVAL text of every script that has a <name>_spread function
-- (cmake/embed_lua.cmake), before prologue.lua. A server older than Redis 7.0 has no Functions, and
-- its EVALSHA must declare every key of one hash slot (CROSSSLOT otherwise); a call of requests of
-- many slots of one cluster node (detail::ScriptCall::spread) then declares its first key alone,
-- the one the call is routed by, and sends the others among its arguments, as the library's
-- <name>_spread function takes them:
-- KEYS[1]     the first request's first key
-- ARGV[1]     "spread": no time the client sends (prologue.lua: digits, or "redis")
-- ARGV[2]     m, the number of keys that follow
-- ARGV[3 .. 2 + m]  the call's KEYS (prologue.lua)
-- ARGV[3 + m ..]    the call's ARGV
-- A 6.x server checks each command of a script against the node's slots ("Lua script attempted to
-- access a non local key in a cluster node": the client sends such a call again slot by slot),
-- not the keys against the ones declared. The client sends this form to such a server only
-- (ScriptPathState::server_before_7): 7.0 refuses keys of two slots in a script whose shebang does
-- not allow them, which this text's does not (and a legacy text sent to a server upgraded under the
-- connection meets the same refusal: the client sends its requests again slot by slot).
-- KEYS and ARGV become locals of the text, which the rest reads: a script may not assign Redis's
-- globals on every version (7.0 makes them read-only).
local KEYS, ARGV = KEYS, ARGV
if ARGV[1] == 'spread' then
  local m, keys, argv = tonumber(ARGV[2]), {}, {}
  for i = 1, m do keys[i] = ARGV[i + 2] end
  for i = m + 3, #ARGV do argv[i - m - 2] = ARGV[i] end
  KEYS, ARGV, spread = keys, argv, true
end
