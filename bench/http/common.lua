-- bench/http/common.lua — shared by the wrk scripts of `scripts/bench http` (loaded with dofile).
--
-- Every response is counted by kind (reserve, commit, other) and by outcome (2xx or not), per wrk
-- thread; done() adds the threads up and prints ONE line that scripts/bench parses:
--
--   TOLLGATE_WRK requests=N duration_us=N p50_us=N p99_us=N mean_us=N max_us=N
--                ok=N non2xx=N reserve_ok=N reserve_non2xx=N commit_ok=N commit_non2xx=N
--                other_ok=N other_non2xx=N sock_connect=N sock_read=N sock_write=N sock_timeout=N
--                codes=409:3,503:1 (or codes=-)
--
-- A benchmark that hides errors is worthless: the caller fails the run on any non-2xx answer or
-- socket error. The kind of an answer comes from the X-Request-Id header the server echoes
-- ("r.…" = reserve, "c.…" = commit), so even an error answer is attributed to the right call.
--
-- The admin key comes from the environment (TOLLGATE_BENCH_KEY), not the command line.

local threads = {}

function setup(thread)
  threads[#threads + 1] = thread
  thread:set("id", #threads)
end

-- Per-thread state (each wrk thread runs its own Lua state).
counts = { reserve_ok = 0, reserve_non2xx = 0, commit_ok = 0, commit_non2xx = 0, other_ok = 0, other_non2xx = 0 }
codes = {}  -- non-2xx status → count

function common_headers()
  local key = os.getenv("TOLLGATE_BENCH_KEY")
  local h = { ["Content-Type"] = "application/json" }
  if key and key ~= "" then h["Authorization"] = "Bearer " .. key end
  return h
end

-- Counts one answer; returns its kind ("reserve", "commit" or "other") and whether it was a 2xx.
function count(status, headers)
  local rid = headers["X-Request-Id"] or headers["x-request-id"]
  -- ours are "r.…" / "c.…"; ids the server made up (hex) never have a '.' second
  local first, second = rid and rid:byte(1), rid and rid:byte(2)
  local kind = (second == 46 and first == 114 and "reserve") or (second == 46 and first == 99 and "commit") or "other"
  local ok = status >= 200 and status < 300
  if ok then
    counts[kind .. "_ok"] = counts[kind .. "_ok"] + 1
  else
    counts[kind .. "_non2xx"] = counts[kind .. "_non2xx"] + 1
    codes[status] = (codes[status] or 0) + 1
  end
  return kind, ok
end

function done(summary, latency, requests)
  local total = { reserve_ok = 0, reserve_non2xx = 0, commit_ok = 0, commit_non2xx = 0, other_ok = 0, other_non2xx = 0 }
  local all_codes = {}
  for _, t in ipairs(threads) do
    local c = t:get("counts")
    for k, v in pairs(c) do total[k] = total[k] + v end
    for status, n in pairs(t:get("codes")) do all_codes[status] = (all_codes[status] or 0) + n end
  end
  local code_list = {}
  for status, n in pairs(all_codes) do code_list[#code_list + 1] = string.format("%d:%d", status, n) end
  table.sort(code_list)
  local ok = total.reserve_ok + total.commit_ok + total.other_ok
  local non2xx = total.reserve_non2xx + total.commit_non2xx + total.other_non2xx
  local e = summary.errors
  io.write(string.format(
    "TOLLGATE_WRK requests=%d duration_us=%d p50_us=%d p99_us=%d mean_us=%d max_us=%d ok=%d non2xx=%d " ..
    "reserve_ok=%d reserve_non2xx=%d commit_ok=%d commit_non2xx=%d other_ok=%d other_non2xx=%d " ..
    "sock_connect=%d sock_read=%d sock_write=%d sock_timeout=%d codes=%s\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), latency.mean, latency.max,
    ok, non2xx, total.reserve_ok, total.reserve_non2xx, total.commit_ok, total.commit_non2xx, total.other_ok,
    total.other_non2xx, e.connect, e.read, e.write, e.timeout, #code_list > 0 and table.concat(code_list, ",") or "-"))
end
