-- A part (cmake/embed_lua.cmake), not a script: in the decide() of token_bucket.lua and
-- leaky_bucket.lua, what a bucket's write writes, and with which TTL. Reads at, t0, whole, frac, u
-- (the stored unit, nil without a state) and need (the time to full, or to empty); sets ttl (nil
-- before), lease and new.
-- The TTL (helpers.lua, bucket_ttl, says what a lease is): 0, keep the key's, while the state's
-- lease still covers the new state (the write in the lease's period, and the state mattering no
-- longer than the key lives: t0 + need); else a new lease from bucket_ttl. A busy subject's writes
-- mostly keep theirs, so the test is written here rather than called: a Lua call costs Redis about
-- as much as the work around it (2% of a batched bucket decision's instructions, callgrind on
-- Redis 7.0: a token bucket's 24,136 to 23,666 in consume_many 128).
-- The value: the whole state (BUCKET), or its head alone (BUCKET_HEAD, helpers.lua) when the key
-- keeps its unit, lease and TTL and holds nothing more (in_place, helpers.lua).
if lease then -- lease_span(at, lease) (helpers.lua), written out
  local e = lease % 32
  local p = LEASE_PERIOD[e]
  local next_period = at - at % p + p
  if t0 < next_period and t0 + need <= next_period + ((lease - e) / 32 + 1) * p then ttl = 0 end
end
if not ttl then ttl, lease = bucket_ttl(t0, need) end
if ttl == 0 and in_place and u == unit then
  new = pack(BUCKET_HEAD, t0, whole, frac)
else
  new = pack(BUCKET, t0, whole, frac, unit, lease)
end
