-- Epilogue: appended at build time to every script in this folder (cmake/embed_lua.cmake). Runs
-- the call's n requests through the script's decide(), in order, and returns their decisions.
-- Each script sets, before this: decide(key, block_key, cost); state_is_string (its state is a
-- plain string, read through the prologue's get/put); width (the length of its decision).
local n = #KEYS / 2

-- One MGET reads every block marker of the call and, for string states, every state: one command
-- whatever n is, where a GET each would cost a command each.
do
  local want = {}
  for i = (state_is_string and 1 or 2), #KEYS, (state_is_string and 1 or 2) do want[#want + 1] = KEYS[i] end
  local got = redis.call('MGET', unpack(want))
  for i = 1, #want do cache[want[i]] = got[i] end
end

-- A blocked subject is rejected until the block ends, whatever its quota; refunds still apply.
local function run(i, cost)
  local key, blk = KEYS[2 * i - 1], KEYS[2 * i]
  if not refund and not blocking then
    local blocked_until = tonumber(get(blk))
    if blocked_until and blocked_until > now then
      local d = {0, 0, blocked_until - now, blocked_until - now, 0}
      if width == 6 then d[6] = 1 end
      return d
    end
  end
  return decide(key, blk, cost)
end

if n == 1 then
  local d = run(1, tonumber(ARGV[2]))
  flush()
  return d
end

-- A rejected request records nothing, so until that subject admits something again, the same
-- request gets the same answer: `rejected[key][cost]` remembers it, and a flood from one subject
-- inside a batch costs a table lookup a request.
local out, rejected = {}, {}
local first_cost = #ARGV - n
for i = 1, n do
  local key = KEYS[2 * i - 1]
  local cost = tonumber(i == 1 and ARGV[2] or ARGV[first_cost + i])
  local seen = rejected[key]
  local d = seen and seen[cost]
  if not d then
    d = run(i, cost)
    if d[1] == 0 then
      if not seen then
        seen = {}
        rejected[key] = seen
      end
      seen[cost] = d
    elseif seen then
      rejected[key] = nil
    end
  end
  for j = 1, width do out[#out + 1] = d[j] end
end
flush()
return out
