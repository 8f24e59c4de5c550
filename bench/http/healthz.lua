-- bench/http/healthz.lua — GET /healthz over keep-alive: the HTTP floor of the server (no auth, no
-- JSON parsing, no database). Counts answers the same way as the ledger scripts, so the client-side
-- cost per answer is the same.  Usage: wrk … -s bench/http/healthz.lua http://HOST:PORT
dofile((debug.getinfo(1, "S").source:sub(2):match("^(.*/)") or "./") .. "common.lua")

local req

function init(args)
  req = wrk.format("GET", "/healthz", {})
end

function request()
  return req
end

function response(status, headers, body)
  count(status, headers)
end
