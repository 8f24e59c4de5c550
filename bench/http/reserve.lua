-- bench/http/reserve.lua — reservations only: POST /v1/holds {account_id, amount: 1, request_id, ttl_ms}.
--
--   wrk … -s bench/http/reserve.lua http://HOST:PORT -- RUN ACCOUNTS [SEED]
--
--   RUN       a prefix that makes request_ids unique across runs on one database
--   ACCOUNTS  1: every request on the account "hot"; N > 1: an account picked at random among
--             acct-00001 … acct-N for each request (math.random, fixed seed SEED + thread id)
--
-- request_id = "r.RUN.THREAD.COUNTER": unique per request, so every answer is a new hold (201).
-- ttl_ms is the configured maximum (1 h) so no hold expires during the run and the ledger's
-- reserved+used totals can be checked against the answers afterwards.
dofile((debug.getinfo(1, "S").source:sub(2):match("^(.*/)") or "./") .. "common.lua")

local run, accounts, headers
local n = 0

function init(args)
  run = args[1] or "run"
  accounts = tonumber(args[2] or "1")
  math.randomseed((tonumber(args[3] or "42")) * 1000 + id)
  headers = common_headers()
end

local function account()
  if accounts <= 1 then return "hot" end
  return string.format("acct-%05d", math.random(accounts))
end

function request()
  n = n + 1
  local rid = string.format("r.%s.%d.%d", run, id, n)
  headers["X-Request-Id"] = rid
  local body = string.format('{"account_id":"%s","amount":1,"request_id":"%s","ttl_ms":3600000}', account(), rid)
  return wrk.format("POST", "/v1/holds", headers, body)
end

function response(status, headers, body)
  count(status, headers)
end
