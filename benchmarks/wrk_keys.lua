-- wrk: each request with one of 100,000 API keys (scripts/bench_http.sh), so that the per-key limit
-- of examples/http_service rarely rejects and the benchmark measures decisions, not 429s.
math.randomseed(os.time())
request = function()
  return wrk.format("GET", nil, { ["X-API-Key"] = "k" .. math.random(1, 100000) })
end
