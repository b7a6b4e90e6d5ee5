-- Spread over EVALSHA: the start of the EVAL text of every script that has a <name>_spread function
-- (cmake/embed_lua.cmake), before prologue.lua: the same calls as that function, for a connection
-- that does not call Functions (a server older than Redis 7.0, Options::redis_functions off, an ACL
-- user denied FCALL). An EVALSHA on a cluster must declare keys of one hash slot (CROSSSLOT
-- otherwise); a call of requests of many slots of one cluster node (detail::ScriptCall::spread)
-- then declares its first key alone, the one the call is routed by, and sends the others among
-- its arguments, as the library's <name>_spread function takes them:
-- KEYS[1]     the first request's first key
-- ARGV[1]     "spread": no time the client sends (prologue.lua: digits, or "redis")
-- ARGV[2]     m, the number of keys that follow
-- ARGV[3 .. 2 + m]  the call's KEYS (prologue.lua)
-- ARGV[3 + m ..]    the call's ARGV
-- The text's shebang (#!lua flags=allow-cross-slot-keys) lets 7.0 and later run commands on keys
-- of other slots; a 6.x server, which gets the text without that line, never checked more. Both
-- still check each command's key against the node's slots ("... attempted to access a non local
-- key ...": a slot moved away; the client sends such a call again slot by slot, before anything
-- was written, since every key is read first).
-- KEYS and ARGV become locals of the text, which the rest reads: a script may not assign Redis's
-- globals on every version (7.0 makes them read-only).
local KEYS, ARGV = KEYS, ARGV
if ARGV[1] == 'spread' then
  KEYS, ARGV = unspread(ARGV, 2) -- helpers.lua
  spread = true
end
