#!/usr/bin/env bash
# bench/http/http_bench.sh — tollgate over HTTP against Redis INCR, in one run (scripts/bench http).
#
# Starts what it needs (a private redis-server without persistence, `tollgate serve` on a fresh
# SQLite database in a temp folder on a real disk), creates the accounts, then measures with wrk
# (keep-alive, -t2 -c64 by default, the Lua scripts of bench/http/):
#
#   healthz             GET /healthz — the HTTP floor of the server (no auth, no database)
#   redis INCR          redis-benchmark -t incr -c 64 — a non-durable counter
#   reservations hot    POST /v1/holds, every request on ONE account (10^12 credits)
#   reservations spread POST /v1/holds on a random one of 10,000 accounts (10^9 credits each)
#   lifecycles hot      reserve, then commit that hold (a commit answered 2xx = one lifecycle)
#   lifecycles spread   the same on the 10,000 accounts
#
# Every answer is counted: any non-2xx answer or socket error in a tollgate workload fails the run
# (exit 1). Afterwards the run is verified against the server: its own request counters (/metrics)
# agree with what wrk saw (up to the requests in flight when wrk stopped), the hot account's
# reserved + used equals the reservations the server answered 201 and its used the commits,
# the active-holds gauge equals reservations minus commits, and GET /v1/audit finds no violation.
#
# Output (stdout): a table, then as the LAST line one JSON object (bench, reservations_per_s,
# lifecycles_per_s, redis_incr_per_s, healthz_per_s, ratio_vs_redis, p50_us, p99_us, per-workload
# figures, load averages). wrk, redis and tollgate share the machine's CPUs: the figures are those of
# a shared box, and the load average before and after is printed with them.
#
# Environment: TOLLGATE_BIN — the tollgate binary (scripts/bench builds build-release/tollgate).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${TOLLGATE_BIN:-$root/build-release/tollgate}"

usage() {
  cat <<'USAGE'
usage: scripts/bench http [options]
  --seconds N        wrk duration per workload, whole seconds (default 10); redis-benchmark is sized
                     to run about as long
  --quick            smoke size: 1 s per workload, 1,000 spread accounts
  --accounts N       accounts of the spread workloads (default 10000)
  --connections N    keep-alive connections of wrk and clients of redis-benchmark (default 64)
  --threads N        wrk threads (default 2)
  --dir PATH         where the database goes (default: a new temp folder on a real disk)
  --allow-tmpfs      run even if the folder is on tmpfs/ramfs (numbers are then not durable ones)
  --keep             keep the folder (database, server log, wrk outputs)
  --perf S           after the measured runs, one more hot reservation run with
                     `perf record -g` on the server for S seconds; the top of
                     `perf report --no-children --sort sym` goes to stderr (not in the figures)
  --require-target   exit 1 if reservations/s is below half of Redis INCR/s
USAGE
}

seconds=10
accounts=10000
connections=64
threads=2
dir=""
allow_tmpfs=0
keep=0
perf_seconds=0
require_target=0
quick=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="${2:?--seconds needs a value}"; shift 2 ;;
    --quick) quick=1; seconds=1; accounts=1000; shift ;;
    --accounts) accounts="${2:?--accounts needs a value}"; shift 2 ;;
    --connections) connections="${2:?--connections needs a value}"; shift 2 ;;
    --threads) threads="${2:?--threads needs a value}"; shift 2 ;;
    --dir) dir="${2:?--dir needs a value}"; shift 2 ;;
    --allow-tmpfs) allow_tmpfs=1; shift ;;
    --keep) keep=1; shift ;;
    --perf) perf_seconds="${2:?--perf needs a value}"; shift 2 ;;
    --require-target) require_target=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "http_bench: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
for v in seconds accounts connections threads perf_seconds; do
  [[ "${!v}" =~ ^[0-9]+$ ]] || { echo "http_bench: --${v%_seconds} must be a whole number" >&2; exit 2; }
done
(( seconds >= 1 )) || { echo "http_bench: --seconds must be at least 1" >&2; exit 2; }
(( accounts >= 2 && accounts <= 99999 )) || { echo "http_bench: --accounts must be from 2 to 99999" >&2; exit 2; }
(( threads >= 1 && connections >= threads )) || { echo "http_bench: need 1 ≤ threads ≤ connections" >&2; exit 2; }

bench_name=http_bench
source "$here/lib.sh"

need_packages wrk redis-server redis-tools curl
(( perf_seconds == 0 )) || command -v perf >/dev/null || die "--perf needs perf (Debian: linux-perf)"
[[ -x "$bin" ]] || die "no tollgate binary at $bin (scripts/bench http builds it)"

pick_dir "$dir" "$allow_tmpfs"

# --- processes: stopped on exit --------------------------------------------------------------------
cleanup() {
  local rc=$?
  stop_servers
  if (( keep )); then
    log "kept $dir"
  elif (( created_dir )); then
    rm -rf "$dir"
  else
    rm -f "$dir"/t.db "$dir"/t.db-wal "$dir"/t.db-shm "$dir"/tollgate.log "$dir"/tollgate.stdout "$dir"/redis.log \
      "$dir"/*.wrk.txt "$dir"/*.curl "$dir"/*.codes "$dir"/metrics.* "$dir"/perf.* "$dir"/redis.csv
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- workloads -----------------------------------------------------------------------------------
R_HOLDS="POST /v1/holds"
R_COMMIT="POST /v1/holds/{hold_id}/commit"
R_HEALTHZ="GET /healthz"

# run_wrk NAME LABEL SCRIPT DURATION [script args...] — wrk_measure (lib.sh), then this bench's
# figures and checks: answers by route on the server's side, lifecycles and reservations per second.
run_wrk() {
  local name=$1 label=$2 script=$3
  wrk_measure "$@"
  local route
  for route in holds commit healthz; do
    local rname
    case $route in holds) rname=$R_HOLDS ;; commit) rname=$R_COMMIT ;; healthz) rname=$R_HEALTHZ ;; esac
    R[$name.server_${route}_ok]=$(( $(server_count "$dir/metrics.after" "$rname" 2xx) - $(server_count "$dir/metrics.before" "$rname" 2xx) ))
    R[$name.server_${route}_non2xx]=$(( $(server_count "$dir/metrics.after" "$rname" non2xx) - $(server_count "$dir/metrics.before" "$rname" non2xx) ))
  done
  local d=${R[$name.duration_us]}
  R[$name.lifecycles_ps]=$(awk -v n="${R[$name.commit_ok]}" -v d="$d" 'BEGIN { printf "%.1f", n / (d / 1e6) }')
  R[$name.reserves_ps]=$(awk -v n="${R[$name.reserve_ok]}" -v d="$d" 'BEGIN { printf "%.1f", n / (d / 1e6) }')
  R[$name.errors]=$(( R[$name.non2xx] + R[$name.sock_connect] + R[$name.sock_read] + R[$name.sock_write] + R[$name.sock_timeout] ))
  # Checks: nothing but 2xx, on either side; the server saw what wrk saw, plus at most what was in flight.
  if (( R[$name.errors] != 0 )); then
    failures+=("$label: ${R[$name.non2xx]} non-2xx answers (status:count ${R[$name.codes]}), socket errors connect ${R[$name.sock_connect]} read ${R[$name.sock_read]} write ${R[$name.sock_write]} timeout ${R[$name.sock_timeout]}")
  fi
  local srv_non2xx=$(( R[$name.server_holds_non2xx] + R[$name.server_commit_non2xx] + R[$name.server_healthz_non2xx] ))
  (( srv_non2xx == 0 )) || failures+=("$label: the server answered $srv_non2xx non-2xx (see $dir/tollgate.log with --keep)")
  local pair client server
  for pair in "reserve_ok:server_holds_ok" "commit_ok:server_commit_ok"; do
    client=${R[$name.${pair%%:*}]}
    server=${R[$name.${pair#*:}]}
    if (( server < client || server > client + connections )); then
      failures+=("$label: wrk counted $client ${pair%%_*} answers, the server $server (expected $client…$((client + connections)))")
    fi
  done
  if [[ "$script" == healthz.lua ]]; then
    client=${R[$name.other_ok]}
    server=${R[$name.server_healthz_ok]}
    if (( server < client || server > client + connections )); then
      failures+=("$label: wrk counted $client answers, the server $server")
    fi
  fi
}

# --- the run ----------------------------------------------------------------------------------------
cpus=$(nproc 2>/dev/null || echo "?")
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
log "folder $dir ($fs); $cpus CPUs shared by wrk, redis-benchmark, redis-server and tollgate; load average $load_before"

probe_fsync
log "disk: one 4 KiB O_DSYNC write takes $fsync_ms ms → a closed loop of $connections connections gets at most ~$closed_loop_bound durable answers/s"

start_redis
start_tollgate tollgate --database "sqlite:$dir/t.db"
log "tollgate $("$bin" version 2>/dev/null | head -1) on $base_url (pid $tollgate_pid), redis on port $redis_port (pid $redis_pid)"

# Accounts: hot (10^12 credits) and the spread ones (10^9 each).
setup_started=$(date +%s.%N)
api POST /v1/accounts '{"account_id":"hot"}' >/dev/null
api POST /v1/accounts/hot/credits '{"amount":1000000000000,"reference":"bench-seed-hot"}' >/dev/null
created=$(for ((i = 1; i <= accounts; i++)); do printf '/v1/accounts\t{"account_id":"acct-%05d"}\n' "$i"; done | bulk accounts)
credited=$(for ((i = 1; i <= accounts; i++)); do
  printf '/v1/accounts/acct-%05d/credits\t{"amount":1000000000,"reference":"bench-seed-%05d"}\n' "$i" "$i"
done | bulk credits)
(( created == accounts && credited == accounts )) || die "setup: created $created accounts, credited $credited"
setup_s=$(awk -v a="$setup_started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
log "setup: 1 hot account + $accounts accounts created and credited in ${setup_s} s"

run_wrk healthz "healthz (HTTP floor)" healthz.lua "$seconds"

redis_incr redis
redis_rps=${R[redis.rps]}

run_wrk reserve_hot "reservations hot" reserve.lua "$seconds" rh 1
run_wrk reserve_spread "reservations spread" reserve.lua "$seconds" rs "$accounts" 7
run_wrk lifecycle_hot "lifecycles hot" lifecycle.lua "$seconds" lh 1
run_wrk lifecycle_spread "lifecycles spread" lifecycle.lua "$seconds" ls "$accounts" 11

hot_runs=(reserve_hot lifecycle_hot)
if (( perf_seconds > 0 )); then
  # An extra run, profiled: not in the figures (perf slows the server), but verified like the others.
  ( sleep 2; perf record -g -o "$dir/perf.data" -p "$tollgate_pid" -- sleep "$perf_seconds" >/dev/null 2>"$dir/perf.record.log" ) &
  perf_job=$!
  run_wrk reserve_hot_perf "reservations hot (profiled, not in the figures)" reserve.lua $((perf_seconds + 3)) rp 1
  wait "$perf_job" || log "perf record failed: $(tail -2 "$dir/perf.record.log")"
  hot_runs+=(reserve_hot_perf)
  if [[ -s "$dir/perf.data" ]]; then
    perf report -i "$dir/perf.data" --no-children --sort sym --stdio -g none 2>/dev/null | grep -v '^$' >"$dir/perf.txt" || true
    perf report -i "$dir/perf.data" --no-children --sort dso --stdio -g none 2>/dev/null | grep -v '^$' >"$dir/perf.dso.txt" || true
    {
      echo "== perf report --no-children --sort dso (tollgate under the hot reservation load)"
      grep -E '^ +[0-9]+\.[0-9]+%' "$dir/perf.dso.txt" | awk 'NR <= 8' || true
      echo "== perf report --no-children --sort sym (tollgate under the hot reservation load; top entries)"
      grep -E '^ +[0-9]+\.[0-9]+%' "$dir/perf.txt" | awk 'NR <= 40' | cut -c1-160 || true
      echo "== (full report: $dir/perf.txt; pass --keep to keep it)"
    } >&2
  fi
fi

# --- verification against the ledger -----------------------------------------------------------------
wait_quiescent
metrics_snapshot "$dir/metrics.final"
reserves_total=$(server_count "$dir/metrics.final" "$R_HOLDS" 2xx)
commits_total=$(server_count "$dir/metrics.final" "$R_COMMIT" 2xx)
hot_reserves=0
hot_commits=0
for n in "${hot_runs[@]}"; do
  hot_reserves=$(( hot_reserves + R[$n.server_holds_ok] ))
  hot_commits=$(( hot_commits + R[$n.server_commit_ok] ))
done
hot_json="$(api GET /v1/accounts/hot)"
hot_reserved=$(json_int reserved <<<"$hot_json")
hot_used=$(json_int used <<<"$hot_json")
hot_active=$(json_int active_holds <<<"$hot_json")
hot_purchased=$(json_int purchased <<<"$hot_json")
(( hot_reserved + hot_used == hot_reserves )) \
  || failures+=("hot account: reserved $hot_reserved + used $hot_used != $hot_reserves reservations answered 201")
(( hot_used == hot_commits )) || failures+=("hot account: used $hot_used != $hot_commits commits answered 200")
(( hot_active == hot_reserved )) || failures+=("hot account: $hot_active active holds but $hot_reserved reserved (amount 1 each)")
(( hot_purchased == 1000000000000 )) || failures+=("hot account: purchased $hot_purchased != 10^12")
active_gauge=$(metric_value "$dir/metrics.final" tollgate_active_holds)
(( active_gauge == reserves_total - commits_total )) \
  || failures+=("active holds $active_gauge != $reserves_total reservations - $commits_total commits")
committed_counter=$(awk '/^tollgate_holds_ended_total\{outcome="committed"\}/ { print $2 }' "$dir/metrics.final")
(( committed_counter == commits_total )) || failures+=("holds committed $committed_counter != $commits_total commits answered")
for m in tollgate_reservation_conflicts_total tollgate_group_commit_overloaded_total tollgate_group_commit_failed_batches_total; do
  v=$(metric_value "$dir/metrics.final" "$m")
  (( v == 0 )) || failures+=("$m is $v")
done
log "audit: GET /v1/audit"
audit_started=$(date +%s.%N)
audit_json="$(api GET /v1/audit)"
audit_s=$(awk -v a="$audit_started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
audit_checked=$(json_int accounts_checked <<<"$audit_json")
grep -q '"violations":\[\]' <<<"$audit_json" || failures+=("audit: violations: $(head -c 600 <<<"$audit_json")")
(( audit_checked == accounts + 1 )) || failures+=("audit checked $audit_checked accounts, expected $((accounts + 1))")
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"

# --- report ------------------------------------------------------------------------------------------
{
  echo
  echo "tollgate HTTP benchmark — wrk -t$threads -c$connections -d${seconds}s (keep-alive), redis-benchmark -c $connections"
  echo "machine: $cpus CPUs SHARED by wrk, redis-benchmark, redis-server and tollgate (and whatever else runs);"
  echo "         load average before $load_before, after $load_after"
  echo "database: $dir/t.db ($fs), WAL flushed before every answer (synchronous=NORMAL + the store's own fdatasync): every 2xx reservation/commit is durable"
  echo
  printf '%-26s %11s %12s %8s %8s %9s %6s %11s %6s\n' workload "requests/s" "lifecycles/s" "p50 ms" "p99 ms" \
    requests errors "cpu us/req" "busy%"
  for n in "${order[@]}"; do
    lc="-"
    [[ $n == lifecycle_* ]] && lc=$(thousands "${R[$n.lifecycles_ps]}")
    printf '%-26s %11s %12s %8s %8s %9s %6s %11s %6s\n' "${R[$n.label]}" "$(thousands "${R[$n.rps]}")" "$lc" \
      "$(ms "${R[$n.p50_us]}")" "$(ms "${R[$n.p99_us]}")" "${R[$n.requests]}" "${R[$n.errors]}" \
      "${R[$n.cpu_us_per_req]}" "${R[$n.machine_busy_pct]}"
  done
  echo
  echo "p50/p99: per HTTP request as wrk times it (a lifecycle is two requests); redis: per INCR."
  echo "cpu us/req: CPU time (user+system, all threads) of tollgate — of redis-server for INCR — per answer;"
  echo "busy%: the whole machine's CPU use during the run (wrk, redis-benchmark and other users included)."
  echo "disk: one flush ≈ $fsync_ms ms (4 KiB O_DSYNC write in $dir) → a closed loop of $connections connections" \
    "can get at most ~$(thousands "$closed_loop_bound") durable answers/s"
  echo "verified: hot account reserved+used = $hot_reserved+$hot_used = $hot_reserves reservations answered 201," \
    "used = $hot_commits commits; active holds $active_gauge = $reserves_total - $commits_total;" \
    "audit of $audit_checked accounts (${audit_s} s): $(grep -q '"violations":\[\]' <<<"$audit_json" && echo clean || echo VIOLATIONS)"
  ratio=$(awk -v a="${R[reserve_hot.rps]}" -v b="$redis_rps" 'BEGIN { printf "%.3f", a / b }')
  met=$(awk -v r="$ratio" 'BEGIN { print ((r >= 0.5) ? "met" : "NOT met") }')
  echo "target: durable reservations/s ≥ 0.5 × Redis INCR/s in the same run: ratio $ratio — $met"
  if (( ${#failures[@]} > 0 )); then
    echo
    echo "FAILED:"
    for f in "${failures[@]}"; do echo "  - $f"; done
  fi
  echo
}

# The last line: one JSON object.
workloads_json=""
for n in "${order[@]}"; do
  entry="{\"name\":\"$n\",\"requests_per_s\":${R[$n.rps]},\"p50_us\":${R[$n.p50_us]},\"p99_us\":${R[$n.p99_us]},\"requests\":${R[$n.requests]},\"errors\":${R[$n.errors]},\"server_cpu_us_per_request\":${R[$n.cpu_us_per_req]},\"server_cores\":${R[$n.server_cores]},\"machine_busy_pct\":${R[$n.machine_busy_pct]}"
  [[ $n == lifecycle_* ]] && entry+=",\"lifecycles_per_s\":${R[$n.lifecycles_ps]},\"lifecycles\":${R[$n.commit_ok]}"
  [[ $n == reserve_* || $n == lifecycle_* ]] && entry+=",\"reservations\":${R[$n.reserve_ok]}"
  workloads_json+="${workloads_json:+,}$entry}"
done
ok=$([[ ${#failures[@]} -eq 0 ]] && echo true || echo false)
printf '{"bench":"http","ok":%s,"reservations_per_s":%s,"lifecycles_per_s":%s,"redis_incr_per_s":%s,"healthz_per_s":%s,"ratio_vs_redis":%s,"target_ratio":0.5,"target_met":%s,"p50_us":%s,"p99_us":%s,"reservations_spread_per_s":%s,"lifecycles_spread_per_s":%s,"lifecycles_p50_us":%s,"lifecycles_p99_us":%s,"redis_p50_us":%s,"redis_p99_us":%s,"healthz_p50_us":%s,"healthz_p99_us":%s,"seconds":%s,"connections":%s,"wrk_threads":%s,"spread_accounts":%s,"cpus":%s,"shared_machine":true,"loadavg_before":"%s","loadavg_after":"%s","filesystem":"%s","fsync_ms":%s,"closed_loop_bound_per_s":%s,"setup_s":%s,"errors":%s,"workloads":[%s]}\n' \
  "$ok" "${R[reserve_hot.rps]}" "${R[lifecycle_hot.lifecycles_ps]}" "$redis_rps" "${R[healthz.rps]}" "$ratio" \
  "$([[ $met == met ]] && echo true || echo false)" "${R[reserve_hot.p50_us]}" "${R[reserve_hot.p99_us]}" \
  "${R[reserve_spread.rps]}" "${R[lifecycle_spread.lifecycles_ps]}" "${R[lifecycle_hot.p50_us]}" "${R[lifecycle_hot.p99_us]}" \
  "${R[redis.p50_us]}" "${R[redis.p99_us]}" "${R[healthz.p50_us]}" "${R[healthz.p99_us]}" \
  "$seconds" "$connections" "$threads" "$accounts" "$cpus" "$load_before" "$load_after" "$fs" "$fsync_ms" "$closed_loop_bound" "$setup_s" "${#failures[@]}" \
  "$workloads_json"

(( ${#failures[@]} == 0 )) || exit 1
(( ! require_target )) || [[ $met == met ]] || exit 1
exit 0
