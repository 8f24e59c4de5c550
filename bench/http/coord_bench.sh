#!/usr/bin/env bash
# bench/http/coord_bench.sh — locks and rate limits over HTTP, beside /healthz and Redis INCR in the
# same run (scripts/bench coord; issue 11's figures).
#
# For each store (SQLite, then PostgreSQL), one `tollgate serve` with two policies far above the
# run's rate ([ratelimits.bench_shared] store = "shared", [ratelimits.bench_local] store = "local",
# 1,000,000 per second each), then with wrk (keep-alive, -t2 -c64 by default, bench/http/coord.lua):
#
#   healthz        GET /healthz — the server's HTTP floor (no auth, no JSON, no database)
#   redis INCR     redis-benchmark -t incr -c 64 — a non-durable counter, on a private redis-server
#   lock pairs     acquire + release of a lock, each wrk thread on its own pool of keys (a pair = a
#                  durable acquire and a durable release)
#   lock held      acquire of a lock the bench holds with another owner: 409 lock_held, refused in
#                  a batch (the batch writes nothing for it and shares its flush; answering it from a
#                  read first was measured slower — build/lock_bench)
#   lock stolen    renew of that lock by an owner that does not hold it: 409 lock_lost, refused in a batch
#   shared check   POST /v1/ratelimits/bench_shared/check on one of 10,000 keys: a batch command,
#                  flushed before it answers (group-committed)
#   local check    the same on bench_local: decided in the instance's memory on the I/O thread
#
# Every answer must be the expected one (200, or 409 for held/stolen); afterwards each run is checked
# against the server: its request counters and decision counters agree with what wrk saw (up to the
# requests in flight when wrk stopped), every pool key's fence equals the acquisitions it was granted
# (fences count hand-overs), no more locks are left held than connections, the held lock still has
# its owner and fence 1, and no check was refused.
#
# PostgreSQL: a throw-away server (scripts/pg: synchronous_commit=on, fsync=on) in a temp folder,
# analyzing quickly as in bench/postgres (stale plans, see docs/internals/benchmarks.md), stopped at the end.
#
# Output (stdout): a table per store, then as the LAST line one JSON object (bench "coord", per
# store: the workloads' figures and the two ratios of issue 11 — local check CPU per request over
# /healthz's (aim ≤ 1.5) and shared checks per second over Redis INCR's (aim ≥ 0.5)).
#
# Environment: TOLLGATE_BIN — the tollgate binary (scripts/bench builds build-release/tollgate).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${TOLLGATE_BIN:-$root/build-release/tollgate}"

usage() {
  cat <<'USAGE'
usage: scripts/bench coord [options]
  --seconds N        wrk duration per workload, whole seconds (default 5)
  --quick            smoke size: 1 s per workload
  --stores LIST      sqlite,postgres (default both)
  --connections N    keep-alive connections of wrk and clients of redis-benchmark (default 64)
  --threads N        wrk threads (default 2)
  --dir PATH         where the SQLite database goes (default: a new temp folder on a real disk)
  --allow-tmpfs      run even if the folder is on tmpfs/ramfs (numbers are then not durable ones)
  --keep             keep the folder (databases, server logs, wrk outputs)
USAGE
}

seconds=5
stores=sqlite,postgres
connections=64
threads=2
dir_arg=""
allow_tmpfs=0
keep=0
quick=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="${2:?--seconds needs a value}"; shift 2 ;;
    --quick) quick=1; seconds=1; shift ;;
    --stores) stores="${2:?--stores needs a value}"; shift 2 ;;
    --connections) connections="${2:?--connections needs a value}"; shift 2 ;;
    --threads) threads="${2:?--threads needs a value}"; shift 2 ;;
    --dir) dir_arg="${2:?--dir needs a value}"; shift 2 ;;
    --allow-tmpfs) allow_tmpfs=1; shift ;;
    --keep) keep=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "coord_bench: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
for v in seconds connections threads; do
  [[ "${!v}" =~ ^[0-9]+$ ]] || { echo "coord_bench: --$v must be a whole number" >&2; exit 2; }
done
(( seconds >= 1 )) || { echo "coord_bench: --seconds must be at least 1" >&2; exit 2; }
(( threads >= 1 && connections >= threads )) || { echo "coord_bench: need 1 ≤ threads ≤ connections" >&2; exit 2; }
for s in ${stores//,/ }; do
  [[ $s == sqlite || $s == postgres ]] || { echo "coord_bench: unknown store '$s' (sqlite, postgres)" >&2; exit 2; }
done

bench_name=coord_bench
source "$here/lib.sh"

need_packages wrk redis-server redis-tools curl
[[ -x "$bin" ]] || die "no tollgate binary at $bin (scripts/bench coord builds it)"
pick_dir "$dir_arg" "$allow_tmpfs"
# A lock pool per wrk thread: 4 keys per connection (a connection has at most one request in flight).
export TOLLGATE_BENCH_POOL=$(( 4 * ((connections + threads - 1) / threads) ))

pg_dir=""
cleanup() {
  local rc=$?
  stop_servers
  [[ -z "$pg_dir" ]] || { "$root/scripts/pg" stop "$pg_dir" >/dev/null 2>&1 || true; (( keep )) || rm -rf -- "$pg_dir"; }
  if (( keep )); then
    log "kept $dir"
  elif (( created_dir )); then
    rm -rf "$dir"
  else
    rm -f "$dir"/coord-*.db* "$dir"/tollgate-*.log "$dir"/tollgate-*.stdout "$dir"/redis.log "$dir"/*.wrk.txt \
      "$dir"/metrics.* "$dir"/*.csv "$dir"/coord.toml "$dir"/locks.json
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

R_ACQUIRE="POST /v1/locks/{key}/acquire"
R_RELEASE="POST /v1/locks/{key}/release"
R_RENEW="POST /v1/locks/{key}/renew"
R_CHECK="POST /v1/ratelimits/{policy}/check"
R_HEALTHZ="GET /healthz"

# delta ROUTE CLASS — answers of ROUTE in CLASS during the last wrk_measure run (server's counters)
delta() { echo $(( $(server_count "$dir/metrics.after" "$1" "$2") - $(server_count "$dir/metrics.before" "$1" "$2") )); }
series_delta() { echo $(( $(metric_value "$dir/metrics.after" "$1") - $(metric_value "$dir/metrics.before" "$1") )); }

# agree LABEL WHAT CLIENT SERVER — the server answered what wrk counted, plus at most what was in flight
agree() {
  local label=$1 what=$2 client=$3 server=$4
  (( server >= client && server <= client + connections )) \
    || failures+=("$label: wrk counted $client $what, the server $server (expected $client…$((client + connections)))")
}

# run STORE NAME LABEL MODE [ARG] — one workload, checked; figures in R[STORE_NAME.*]
run() {
  local store=$1 name=$2 label=$3 mode=$4 arg=${5:-}
  local w="${store}_$name" script=coord.lua
  [[ $mode == healthz ]] && script=healthz.lua
  wrk_measure "$w" "$store: $label" "$script" "$seconds" "$mode" "$w" "$arg"
  R[$w.store]=$store
  [[ $mode == healthz ]] && R[$w.unexpected]=${R[$w.non2xx]}
  R[$w.errors]=$(( R[$w.unexpected] + R[$w.socket_errors] ))
  (( R[$w.errors] == 0 )) || failures+=("$store $label: ${R[$w.unexpected]} unexpected answers (${R[$w.codes]}), ${R[$w.socket_errors]} socket errors")
  local d=${R[$w.duration_us]}
  case $mode in
    healthz)
      agree "$store $label" answers "${R[$w.other_ok]}" "$(delta "$R_HEALTHZ" 2xx)" ;;
    pairs)
      agree "$store $label" acquisitions "${R[$w.a200]}" "$(delta "$R_ACQUIRE" 200)"
      agree "$store $label" releases "${R[$w.r200]}" "$(delta "$R_RELEASE" 200)"
      agree "$store $label" acquisitions "${R[$w.a200]}" "$(series_delta 'tollgate_lock_decisions_total{outcome="acquired"}')"
      R[$w.pairs_per_s]=$(awk -v n="${R[$w.r200]}" -v d="$d" 'BEGIN { printf "%.1f", n / (d / 1e6) }')
      R[$w.acquired]=$(delta "$R_ACQUIRE" 200) ;;
    held)
      agree "$store $label" "lock_held answers" "${R[$w.h409]}" "$(delta "$R_ACQUIRE" 409)"
      agree "$store $label" "lock_held decisions" "${R[$w.h409]}" "$(series_delta 'tollgate_lock_decisions_total{outcome="held"}')" ;;
    stolen)
      agree "$store $label" "lock_lost answers" "${R[$w.s409]}" "$(delta "$R_RENEW" 409)"
      agree "$store $label" "lock_lost decisions" "${R[$w.s409]}" "$(series_delta 'tollgate_lock_decisions_total{outcome="lost"}')" ;;
    check)
      local kind=shared
      [[ $arg == bench_local ]] && kind=local
      agree "$store $label" "allowed checks" "${R[$w.c200]}" "$(delta "$R_CHECK" 200)"
      agree "$store $label" "allowed decisions" "${R[$w.c200]}" \
        "$(series_delta "tollgate_ratelimit_decisions_total{policy=\"$arg\",store=\"$kind\",decision=\"allowed\"}")"
      local limited
      limited=$(series_delta "tollgate_ratelimit_decisions_total{policy=\"$arg\",store=\"$kind\",decision=\"limited\"}")
      (( limited == 0 )) || failures+=("$store $label: $limited checks refused by a policy far above the run's rate") ;;
  esac
}

# verify_locks STORE — every pool key of the pairs run: its fence is the number of times it was
# granted (each acquisition is a hand-over: +1), so the fences add up to the acquisitions answered 200;
# at most one lock per connection is left held (granted, its release never sent).
verify_locks() {
  local store=$1 w="${1}_pairs" urls=() t slot
  for ((t = 1; t <= threads; t++)); do
    for ((slot = 1; slot <= TOLLGATE_BENCH_POOL; slot++)); do urls+=("$base_url/v1/locks/$w.T$t.$slot"); done
  done
  curl -sS -H "Authorization: Bearer $admin_key" "${urls[@]}" >"$dir/locks.json" || die "reading the pool's locks failed"
  local fences held
  fences=$(grep -o '"fence":[0-9]*' "$dir/locks.json" | awk -F: '{ s += $2 } END { printf "%d\n", s }')
  held=$(grep -o '"held":true' "$dir/locks.json" | wc -l)
  (( fences == R[$w.acquired] )) || failures+=("$store lock pairs: the pool's fences add up to $fences, but $((R[$w.acquired])) acquisitions were answered 200")
  (( held <= connections )) || failures+=("$store lock pairs: $held locks left held, more than the $connections connections")
  R[$w.fences_sum]=$fences
  R[$w.left_held]=$held
  local lock
  lock="$(api GET /v1/locks/bench-held)"
  grep -q '"owner":"bench-holder"' <<<"$lock" && grep -q '"fence":1,' <<<"$lock" && grep -q '"held":true' <<<"$lock" \
    || failures+=("$store: the held lock changed hands: $lock")
}

measure_store() {
  local store=$1 database
  case $store in
    sqlite) database="sqlite:$dir/coord-sqlite.db" ;;
    postgres)
      need_packages postgresql
      pg_dir=$(mktemp -d /tmp/tgcb.XXXXXX)  # short: the unix socket path must fit 107 bytes
      chmod 0755 "$pg_dir"
      database=$("$root/scripts/pg" start "$pg_dir") || die "scripts/pg start failed"
      local psql=/usr/lib/postgresql/15/bin/psql s
      for s in "autovacuum_naptime = '1s'" "autovacuum_analyze_threshold = 500" "autovacuum_analyze_scale_factor = 0"; do
        "$psql" "$database" -X -q -v ON_ERROR_STOP=1 -c "ALTER SYSTEM SET $s" >/dev/null
      done
      "$psql" "$database" -X -q -c "SELECT pg_reload_conf()" >/dev/null ;;
  esac
  start_tollgate "tollgate-$store" --config "$dir/coord.toml" --database "$database"
  log "$store: tollgate on $base_url (pid $tollgate_pid)"
  api POST /v1/locks/bench-held/acquire '{"owner":"bench-holder","ttl_ms":3600000}' >/dev/null
  # A short warm-up of every path (plans, caches), not measured.
  wrk -t1 -c4 -d1s -s "$root/bench/http/coord.lua" "$base_url" -- pairs "${store}_warm" >/dev/null 2>&1 || true
  wrk -t1 -c4 -d1s -s "$root/bench/http/coord.lua" "$base_url" -- check "${store}_warm" bench_shared >/dev/null 2>&1 || true

  run "$store" healthz "healthz (HTTP floor)" healthz
  redis_incr "${store}_redis"
  R[${store}_redis.store]=$store
  run "$store" pairs "lock acquire+release" pairs
  run "$store" held "acquire, held (refused)" held bench-held
  run "$store" stolen "renew, lost (refused)" stolen bench-held
  run "$store" shared "shared check" check bench_shared
  run "$store" local "local check" check bench_local
  verify_locks "$store"

  R[$store.local_cpu_ratio]=$(awk -v a="${R[${store}_local.cpu_us_per_req]}" -v b="${R[${store}_healthz.cpu_us_per_req]}" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
  R[$store.shared_redis_ratio]=$(awk -v a="${R[${store}_shared.rps]}" -v b="${R[${store}_redis.rps]}" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')
  stop_pid "$tollgate_pid"
  tollgate_pid=""
}

cpus=$(nproc 2>/dev/null || echo "?")
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
log "folder $dir ($fs); $cpus CPUs shared by wrk, redis-benchmark, redis-server and tollgate; load average $load_before"
probe_fsync
log "disk: one 4 KiB O_DSYNC write takes $fsync_ms ms"
cat >"$dir/coord.toml" <<'TOML'
[ratelimits.bench_shared]
limit = 1000000
period_ms = 1000
store = "shared"

[ratelimits.bench_local]
limit = 1000000
period_ms = 1000
store = "local"
TOML
start_redis
for s in ${stores//,/ }; do measure_store "$s"; done
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"

# --- report ------------------------------------------------------------------------------------------
{
  echo
  echo "tollgate coordination benchmark — wrk -t$threads -c$connections -d${seconds}s (keep-alive), redis-benchmark -c $connections"
  echo "machine: $cpus CPUs SHARED by wrk, redis-benchmark, redis-server, tollgate (and PostgreSQL); load average before $load_before, after $load_after"
  echo "SQLite: $dir ($fs), one flush ≈ $fsync_ms ms; PostgreSQL: synchronous_commit=on, fsync=on. Locks and shared checks are durable before they answer."
  for s in ${stores//,/ }; do
    echo
    printf '%-32s %11s %9s %8s %8s %11s %6s\n' "$s" "requests/s" "pairs/s" "p50 ms" "p99 ms" "cpu us/req" "busy%"
    for n in "${order[@]}"; do
      [[ ${R[$n.store]:-} == "$s" ]] || continue
      pairs="-"
      [[ $n == *_pairs ]] && pairs=$(thousands "${R[$n.pairs_per_s]}")
      printf '%-32s %11s %9s %8s %8s %11s %6s\n' "${R[$n.label]#"$s: "}" "$(thousands "${R[$n.rps]}")" "$pairs" \
        "$(ms "${R[$n.p50_us]}")" "$(ms "${R[$n.p99_us]}")" "${R[$n.cpu_us_per_req]}" "${R[$n.machine_busy_pct]}"
    done
    echo "  local check CPU per request / healthz's: ${R[$s.local_cpu_ratio]} (aim ≤ 1.5)"
    echo "  shared checks/s / Redis INCR/s:          ${R[$s.shared_redis_ratio]} (aim ≥ 0.5)"
    echo "  verified: pool fences add up to ${R[${s}_pairs.fences_sum]} = acquisitions answered 200; ${R[${s}_pairs.left_held]} locks left held (≤ $connections); counters agree"
  done
  echo
  echo "cpu us/req: CPU time (user+system, all threads) of tollgate — of redis-server for INCR — per answer (PostgreSQL's own CPU is not in it)."
  if (( ${#failures[@]} > 0 )); then
    echo
    echo "FAILED:"
    for f in "${failures[@]}"; do echo "  - $f"; done
  fi
  echo
}

json=""
for s in ${stores//,/ }; do
  ws=""
  for n in "${order[@]}"; do
    [[ ${R[$n.store]:-} == "$s" ]] || continue
    e="{\"name\":\"${n#"${s}_"}\",\"requests_per_s\":${R[$n.rps]},\"p50_us\":${R[$n.p50_us]},\"p99_us\":${R[$n.p99_us]},\"requests\":${R[$n.requests]},\"errors\":${R[$n.errors]},\"server_cpu_us_per_request\":${R[$n.cpu_us_per_req]},\"machine_busy_pct\":${R[$n.machine_busy_pct]}"
    [[ $n == *_pairs ]] && e+=",\"pairs_per_s\":${R[$n.pairs_per_s]}"
    ws+="${ws:+,}$e}"
  done
  json+="${json:+,}\"$s\":{\"lock_pairs_per_s\":${R[${s}_pairs.pairs_per_s]},\"shared_checks_per_s\":${R[${s}_shared.rps]},\"local_checks_per_s\":${R[${s}_local.rps]},\"healthz_per_s\":${R[${s}_healthz.rps]},\"redis_incr_per_s\":${R[${s}_redis.rps]},\"local_cpu_ratio_vs_healthz\":${R[$s.local_cpu_ratio]},\"shared_ratio_vs_redis\":${R[$s.shared_redis_ratio]},\"workloads\":[$ws]}"
done
ok=$([[ ${#failures[@]} -eq 0 ]] && echo true || echo false)
printf '{"bench":"coord","ok":%s,%s,"seconds":%s,"connections":%s,"wrk_threads":%s,"cpus":%s,"shared_machine":true,"loadavg_before":"%s","loadavg_after":"%s","fsync_ms":%s,"errors":%s}\n' \
  "$ok" "$json" "$seconds" "$connections" "$threads" "$cpus" "$load_before" "$load_after" "$fsync_ms" "${#failures[@]}"
(( ${#failures[@]} == 0 ))
