-- bench/http/lifecycle.lua — reserve+commit lifecycles: POST /v1/holds, then
-- POST /v1/holds/{hold_id}/commit {} for the hold it created.
--
--   wrk … -s bench/http/lifecycle.lua http://HOST:PORT -- RUN ACCOUNTS [SEED]
--
-- (arguments as in reserve.lua). Each wrk thread keeps a queue of the hold_ids parsed from its 201
-- answers; request() commits the oldest queued hold if there is one, else reserves. A commit
-- answered 2xx is one lifecycle. Holds still queued when the run ends stay active (reserved).
dofile((debug.getinfo(1, "S").source:sub(2):match("^(.*/)") or "./") .. "common.lua")

local run, accounts, headers
local n, commits = 0, 0
local queue, head, tail = {}, 1, 0
local commit_body = "{}"

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
  if head <= tail then
    local hold = queue[head]
    queue[head] = nil
    head = head + 1
    commits = commits + 1
    headers["X-Request-Id"] = string.format("c.%s.%d.%d", run, id, commits)
    return wrk.format("POST", "/v1/holds/" .. hold .. "/commit", headers, commit_body)
  end
  n = n + 1
  local rid = string.format("r.%s.%d.%d", run, id, n)
  headers["X-Request-Id"] = rid
  local body = string.format('{"account_id":"%s","amount":1,"request_id":"%s","ttl_ms":3600000}', account(), rid)
  return wrk.format("POST", "/v1/holds", headers, body)
end

function response(status, headers, body)
  local kind, ok = count(status, headers)
  if kind == "reserve" and status == 201 then
    local hold = body:match('"hold_id":"([^"]+)"')
    if hold then
      tail = tail + 1
      queue[tail] = hold
    else
      -- a 201 without a hold_id is an error of the server: count it as one
      counts.reserve_ok = counts.reserve_ok - 1
      counts.reserve_non2xx = counts.reserve_non2xx + 1
      codes[0] = (codes[0] or 0) + 1
    end
  end
end
