-- Fixed window: counts the units admitted in the clock-aligned window [start, start + window).
--
-- KEYS: one per request (prologue.lua): the state, which holds its block
-- state: pack(WINDOW, start, used, window), see helpers.lua: <used> units admitted in the window of
--        length <window> that starts at <start> (us)
-- ARGV[1..2] now; the head: mode, cost, then the parameters (prologue.lua; helpers.lua, params)
--          "<limit> <window>": the units admitted per window and the window's length (us)
-- Returns {allowed 0|1, remaining, retry_after_us, reset_after_us, delay_us = 0}
--
-- Time math: windows are aligned to the epoch, start = now - (now mod window). A stored start
-- ahead of ours (written by a client whose clock runs ahead) wins: we never go back to counting an
-- older window. A refund gives units back to the current window only; those of a window that has
-- ended are gone anyway. The state is worthless once its window ends: that is its TTL, set by the
-- write that starts the window's state; later writes in the window keep it (ttl 0, the epilogue's
-- SET KEEPTTL): a write that sets a TTL costs Redis about a microsecond more (PSETEX, SET PX and
-- SET PXAT alike, measured on 7.0).
-- Reconfiguration: a changed limit keeps what was consumed (remaining is clamped at 0). A state
-- written under another window length counts in the current window when the two windows overlap
-- (what was consumed stays consumed), and is then rewritten as the current window's.
local limit, window, current -- this call's: limit, window length (us), start of the current window
local params_arg -- the string limit and window were parsed from (helpers.lua, params)
local state_is_string, reads_marker, width = true, false, 5

local function decide(_, cost, v)
  local start, used = current, 0
  local ttl_set = false -- the stored state is this window's, and its TTL was set for this window
  if v then
    local s, c, w
    if #v == 20 then s, c, w = unpack_(WINDOW, v) else s, c, w = unpack_window(v, window) end -- a call less
    if s and w == window then
      if s >= start then start, used, ttl_set = s, c, true end
    elseif s and s < current + window and s + w > current then
      used = c
    end
  end
  local window_end = start + window

  local allowed = refund or used + cost <= limit
  local new, ttl = nil, nil
  if refund then
    if used > 0 then
      used = max(0, used - cost)
      new = pack(WINDOW, start, used, window)
    end
  elseif allowed and record then
    used = used + cost
    new = pack(WINDOW, start, used, window)
  end
  if new then ttl = ttl_set and 0 or ttl_ms(window_end - now) end

  local retry_after = 0
  if not allowed then retry_after = window_end - now end -- the next window starts empty
  local reset_after = 0
  if used > 0 then reset_after = window_end - now end
  local remaining = limit - used
  if remaining < 0 then remaining = 0 end
  return allowed and 1 or 0, remaining, retry_after, reset_after, 0, 1, new, ttl
end

-- Per call: -------------------------------------------------------------------------------------
if params ~= params_arg then
  params_arg = params
  local p = words(params_arg)
  limit, window = tonumber(p[1]), tonumber(p[2])
end
-- now mod window inline, as helpers.lua's TWO52 note divides: Lua's % may come out short by a
-- window, which the test puts back; a call into C (fmod) costs Redis more than the three steps.
local r = now % window
if r < 0 then r = r + window end
current = now - r
