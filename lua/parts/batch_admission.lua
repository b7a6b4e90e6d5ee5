-- A part (cmake/embed_lua.cmake), not a script: in the batch loops of epilogue.lua and
-- fixed_window.lua, the text that appends an admission waiting for nothing to the reply `out` after
-- position m, in the forms of epilogue.lua's reply: one negative integer when it can, else
-- {3, remaining, reset_after}. Written into the loops rather than called: a Lua call per decision
-- costs Redis about as much as the work around it (helpers.lua, TWO52). Reads rem, reset,
-- last_reset (the previous decision's reset_after) and most_cost (the strategy's limit L); moves m.
if reset == last_reset and rem >= 0 then
  out[m + 1] = -1 - 2 * rem -- (an odd negative: remaining, with the previous decision's reset)
  m = m + 1
else
  local p = reset * (most_cost + 1) + rem -- exact below 2^53; past it rounded to 2^53 or more
  if rem >= 0 and rem <= most_cost and p < TWO52 then
    out[m + 1] = -2 - 2 * p -- (an even negative, down to -2^53: exact)
    m = m + 1
  else
    out[m + 1] = 3
    out[m + 2] = rem
    out[m + 3] = reset
    m = m + 3
  end
end
