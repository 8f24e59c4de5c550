-- bench/http/coord.lua — locks and rate limits over HTTP (scripts/bench coord).
--
--   wrk … -s bench/http/coord.lua http://HOST:PORT -- MODE RUN [ARG]
--
-- MODE
--   pairs   lock acquire + release pairs: each wrk thread owns a pool of keys
--           ("RUN.T<thread>.<slot>", owner "RUN.o<thread>"); request() releases the oldest lock this
--           thread holds (with its fence) if there is one, else acquires a free key of its pool
--           (ttl 60 s). A release answered 200 is one pair.
--   held    every request acquires the key ARG, which the bench holds for the whole run with
--           another owner: each answer must be 409 lock_held (refused in a batch).
--   stolen  every request renews the key ARG as an owner that does not hold it: each answer must be
--           409 lock_lost, decided in a batch (what a refused acquire would cost without the read).
--   check   POST /v1/ratelimits/ARG/check {key} on a key picked at random among 10,000
--           ("RUN.k<n>"); the policy's limit is far above the run's rate, so each answer must be
--           200 allowed.
--
-- Answers are counted by kind (the first letter of the X-Request-Id the server echoes: a = acquire,
-- r = release, h = held, s = stolen, c = check) and status; done() prints ONE line for the driver:
--
--   TOLLGATE_WRK requests=N duration_us=N p50_us=N p99_us=N mean_us=N max_us=N
--                a200=N r200=N h409=N s409=N c200=N unexpected=N sock_connect=N sock_read=N
--                sock_write=N sock_timeout=N codes=KIND:STATUS:N,… (or codes=-)
--
-- Anything but the expected status of its kind is "unexpected" (the driver fails the run on it).
local threads = {}

function setup(thread)
  threads[#threads + 1] = thread
  thread:set("id", #threads)
end

local expected = { a = 200, r = 200, h = 409, s = 409, c = 200 }
counts = { a200 = 0, r200 = 0, h409 = 0, s409 = 0, c200 = 0, unexpected = 0 }
codes = {}  -- "kind:status" → count, unexpected answers only

local mode, run, arg, headers
local n = 0
local free, free_n = {}, 0        -- pairs: keys of this thread not held or asked for
local held, head, tail = {}, 1, 0  -- pairs: {key, fence} of locks granted, oldest first
local owner

function init(args)
  mode = args[1] or "pairs"
  run = args[2] or "run"
  arg = args[3] or ""
  local key = os.getenv("TOLLGATE_BENCH_KEY")
  headers = { ["Content-Type"] = "application/json" }
  if key and key ~= "" then headers["Authorization"] = "Bearer " .. key end
  math.randomseed(1000 + id)
  owner = string.format("%s.o%d", run, id)
  -- at most one request in flight per connection, so a pool of 4 keys per connection never runs dry
  local pool = tonumber(os.getenv("TOLLGATE_BENCH_POOL") or "256")
  for slot = 1, pool do
    free_n = free_n + 1
    free[free_n] = string.format("%s.T%d.%d", run, id, slot)
  end
end

local function tagged(kind)
  n = n + 1
  headers["X-Request-Id"] = string.format("%s.%s.%d.%d", kind, run, id, n)
end

function request()
  if mode == "pairs" then
    if head <= tail then
      local lock = held[head]
      held[head] = nil
      head = head + 1
      tagged("r")
      return wrk.format("POST", "/v1/locks/" .. lock.key .. "/release", headers,
        string.format('{"owner":"%s","fence":%d}', owner, lock.fence))
    end
    local key = free[free_n]
    free[free_n] = nil
    free_n = free_n - 1
    tagged("a")
    return wrk.format("POST", "/v1/locks/" .. key .. "/acquire", headers,
      string.format('{"owner":"%s","ttl_ms":60000}', owner))
  elseif mode == "held" then
    tagged("h")
    return wrk.format("POST", "/v1/locks/" .. arg .. "/acquire", headers,
      string.format('{"owner":"%s","ttl_ms":60000}', owner))
  elseif mode == "stolen" then
    tagged("s")
    return wrk.format("POST", "/v1/locks/" .. arg .. "/renew", headers,
      string.format('{"owner":"%s","ttl_ms":60000,"fence":1}', owner))
  else
    tagged("c")
    return wrk.format("POST", "/v1/ratelimits/" .. arg .. "/check", headers,
      string.format('{"key":"%s.k%d"}', run, math.random(10000)))
  end
end

function response(status, hdrs, body)
  local rid = hdrs["X-Request-Id"] or hdrs["x-request-id"] or "?"
  local kind = rid:sub(1, 1)
  if expected[kind] == status then
    counts[kind .. status] = counts[kind .. status] + 1
  else
    counts.unexpected = counts.unexpected + 1
    local k = kind .. ":" .. status
    codes[k] = (codes[k] or 0) + 1
  end
  if mode == "pairs" then
    local key = body:match('"key":"([^"]+)"')
    if kind == "a" and status == 200 then
      tail = tail + 1
      held[tail] = { key = key, fence = tonumber(body:match('"fence":(%d+)')) }
    elseif key and (kind == "r" or kind == "a") then
      -- released (or an acquire refused): the key is free again
      free_n = free_n + 1
      free[free_n] = key
    end
  end
end

function done(summary, latency, requests)
  local total = { a200 = 0, r200 = 0, h409 = 0, s409 = 0, c200 = 0, unexpected = 0 }
  local all_codes = {}
  for _, t in ipairs(threads) do
    for k, v in pairs(t:get("counts")) do total[k] = total[k] + v end
    for k, v in pairs(t:get("codes")) do all_codes[k] = (all_codes[k] or 0) + v end
  end
  local list = {}
  for k, v in pairs(all_codes) do list[#list + 1] = string.format("%s:%d", k, v) end
  table.sort(list)
  local e = summary.errors
  io.write(string.format(
    "TOLLGATE_WRK requests=%d duration_us=%d p50_us=%d p99_us=%d mean_us=%d max_us=%d " ..
    "a200=%d r200=%d h409=%d s409=%d c200=%d unexpected=%d " ..
    "sock_connect=%d sock_read=%d sock_write=%d sock_timeout=%d codes=%s\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), latency.mean, latency.max,
    total.a200, total.r200, total.h409, total.s409, total.c200, total.unexpected,
    e.connect, e.read, e.write, e.timeout, #list > 0 and table.concat(list, ",") or "-"))
end
