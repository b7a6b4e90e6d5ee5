-- Block: deny a subject outright until now + duration, whatever its quota.
--
-- KEYS[1]  the strategy's state (untouched; named so the call routes to the subject's slot)
-- KEYS[2]  the block marker: string "blocked until" (us), expiring with the block
-- ARGV[1..3] now, cost (unused), mode "3" (prologue)
-- ARGV[4]  duration of the block (us)
-- Returns {0, 0, duration, duration, 0}: the decision any request gets during the block.
local blocked_until = now + tonumber(ARGV[4])
local current = tonumber(redis.call('GET', KEYS[2]))
if current and current > blocked_until then blocked_until = current end -- never shorten a block
redis.call('PSETEX', KEYS[2], ttl_text(ttl_ms(blocked_until - now)), fmt(blocked_until))
return {0, 0, blocked_until - now, blocked_until - now, 0}
