-- Block: deny a subject outright until now + duration, whatever its quota.
--
-- KEYS[1]  the strategy's state (untouched; named so the call routes to the subject's slot)
-- KEYS[2]  the block marker: string "blocked until" (us), expiring with the block
-- ARGV[1..3] now, cost (unused), mode "3" (prologue)
-- ARGV[4]  duration of the block (us)
-- Returns {0, 0, duration, duration, 0}: the decision any request gets during the block.
local duration = tonumber(ARGV[4])
local state_is_string, width = false, 5

local function decide(_, blk, _)
  local blocked_until = now + duration
  local current = tonumber(get(blk))
  if current and current > blocked_until then blocked_until = current end -- never shorten a block
  put(blk, fmt(blocked_until), ttl_ms(blocked_until - now))
  return {0, 0, blocked_until - now, blocked_until - now, 0}
end
