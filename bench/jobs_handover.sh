#!/usr/bin/env bash
# How long a job in flight at a restart waits after its provider finished, with the README's provider
# block (timeout_ms 60000, expected_duration_ms 20000) and `tollgate fake-provider` taking 2 s a job.
#
#   bench/jobs_handover.sh BUILD_DIR sigterm|kill9 [N] [DATABASE]
#
# Starts a fake provider and `tollgate serve` (SQLite in a temporary folder, or DATABASE: a
# postgresql:// URI with an empty schema), submits N jobs (default 3), stops the server 0.3 s later
# (SIGTERM or kill -9), starts it again on the same database and port, and prints per job the
# seconds from the provider finishing (its POST + 2 s; the POST follows the submit within a few ms)
# to the job's end (its updated_at, on the server's clock: the same machine), and the provider's POST count (1: never sent twice).
# For several instances on PostgreSQL see tests/http/job_handover_test.cc (JobHandover.*), which
# prints the same figures ("[ handover ] …").
set -euo pipefail
build=${1:?build dir}
mode=${2:?sigterm or kill9}
n=${3:-3}
database=${4:-}
bin="$build/tollgate"
dir=$(mktemp -d /tmp/jobs-handover.XXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
key=bench-admin-key-0123456789abcdef
now_ms() { date +%s%3N; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

pport=$(free_port)
"$bin" fake-provider --listen 127.0.0.1:$pport --latency-ms 2000..2000 >"$dir/provider.log" 2>&1 &
cat >"$dir/tollgate.toml" <<EOF
[providers.imagegen]
url = "http://127.0.0.1:$pport/generate"
status_url = "http://127.0.0.1:$pport/status/{id}"
timeout_ms = 60000
expected_duration_ms = 20000
max_attempts = 3
EOF
[ -n "$database" ] || database="sqlite:$dir/tollgate.db"
port=$(free_port)
serve() {
  TOLLGATE_ADMIN_KEY=$key "$bin" serve --config "$dir/tollgate.toml" --listen 127.0.0.1:$port --database "$database" \
    >>"$dir/serve.log" 2>&1 &
  server=$!
  for _ in $(seq 200); do curl -sf localhost:$port/healthz >/dev/null 2>&1 && return; sleep 0.05; done
  echo "the server did not start:"; cat "$dir/serve.log"; exit 1
}
api() { curl -s -H "Authorization: Bearer $key" -H 'Content-Type: application/json' "$@"; }

serve
api -X POST localhost:$port/v1/accounts -d '{"account_id":"kiosk"}' >/dev/null
api -X POST localhost:$port/v1/accounts/kiosk/credits -d '{"amount":100,"reference":"r"}' >/dev/null
declare -A finished
for i in $(seq "$n"); do
  id="bench-$mode-$i-$$"
  api -X POST localhost:$port/v1/jobs -d "{\"client_request_id\":\"$id\",\"account_id\":\"kiosk\",\"cost\":1,\"provider\":\"imagegen\",\"input\":{}}" >/dev/null
  finished[$id]=$(( $(now_ms) + 2000 ))
done
sleep 0.3
if [ "$mode" = kill9 ]; then kill -9 $server; else kill -TERM $server; fi
stop_start=$(now_ms)
wait $server 2>/dev/null || true
echo "server stopped ($mode) in $(( $(now_ms) - stop_start )) ms"
serve
for id in "${!finished[@]}"; do
  for _ in $(seq 1000); do  # 200 s at most
    read -r status ended < <(api "localhost:$port/v1/jobs/$id?wait_ms=200" | python3 -c '
import datetime, json, sys
j = json.load(sys.stdin)
t = datetime.datetime.fromisoformat(j["updated_at"].replace("Z", "+00:00"))
print(j["status"], int(t.timestamp() * 1000))')
    case $status in completed|failed|cancelled) break ;; esac
  done
  posts=$(curl -s localhost:$pport/stats | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"])')
  printf '%s: %s %.2f s after the provider finished (provider POSTs so far: %s)\n' "$id" "$status" \
    "$(echo "($ended - ${finished[$id]}) / 1000" | bc -l)" "$posts"
done
kill -TERM $server; wait $server 2>/dev/null || true
grep -h "handed back" "$dir/serve.log" || true
