#!/usr/bin/env bash
# bench/postgres/postgres_bench.sh — tollgate on PostgreSQL against the textbook pgbench baseline, in
# one run (scripts/bench postgres).
#
# Starts a throw-away PostgreSQL server (scripts/pg: synchronous_commit=on, fsync=on) in a temp
# folder under /tmp, then on it:
#   1. the baseline (bench/postgres/baseline.sh): pgbench, 64 clients, one transaction per
#      reserve+commit lifecycle (the textbook UPDATE … WHERE available >= 1 RETURNING available, then
#      the commit UPDATE), hot account and 10,000 accounts;
#   2. tollgate (build-release/ledger_bench --database URI --instances K): 64 callers looping durable
#      reserve+commit lifecycles through Ledger + PgStore (group commit), hot account and 10,000
#      accounts, for K = 1, 2 and 3 instances (K PgStore + Ledger in one process, each with its own
#      writer connection and group committer, on the same schema; callers round-robin). Each cell is
#      verified by ledger_bench (audit clean, sum(used) = lifecycles completed, nothing reserved).
# and stops the server (also on failure or Ctrl-C). The outputs of both programs go to stderr.
#
# Output (stdout): a table (lifecycles/s, p50, p99, batch figures, ratio to the baseline), then as
# the LAST line one JSON object: bench "postgres", hot_ratio and spread_ratio (1 instance against the
# baseline), the absolute figures of both, by_instances (per instance count), targets, load averages.
# Exit 1 if a check failed (the JSON line is still printed); the targets are reported, not enforced.
# --profile adds a run of the 1-instance hot cell with bench/postgres/pq_timing.cc preloaded (libpq
# round trips per batch, time in COMMIT and in the other statements; to stderr, not in the figures).
#
# Environment: LEDGER_BENCH — the ledger_bench binary (scripts/bench builds it; default
# build-release/ledger_bench), PG_BIN (default /usr/lib/postgresql/15/bin).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bench_bin="${LEDGER_BENCH:-$root/build-release/ledger_bench}"
PG_BIN="${PG_BIN:-/usr/lib/postgresql/15/bin}"
export LC_ALL=C

usage() {
  cat <<'USAGE'
usage: scripts/bench postgres [options]
  --seconds N        pgbench duration and tollgate measurement window per cell, whole seconds
                     (default 10; tollgate cells also warm up 2 s first)
  --quick            smoke size: 1 s pgbench runs, 0.3 s tollgate windows, 1,000 spread accounts
  --instances LIST   tollgate instance counts, comma-separated (default 1,2,3)
  --clients N        pgbench clients and tollgate callers (default 64)
  --accounts N       accounts of the spread workloads (default 10000)
  --keep             keep the work folder (program outputs, server log) after a successful run
  --profile          after the measured runs, one more run of the 1-instance hot cell (not in the
                     figures) with bench/postgres/pq_timing.cc preloaded: libpq round trips per
                     batch, time in COMMIT against the other statements, per statement (to stderr)
USAGE
}

seconds=10 seconds_set=0 quick=0 instances_list="1,2,3" clients=64 accounts=10000 accounts_set=0 keep=0 profile=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="${2:?--seconds needs a value}"; seconds_set=1; shift 2 ;;
    --quick) quick=1; shift ;;
    --instances) instances_list="${2:?--instances needs a value}"; shift 2 ;;
    --clients) clients="${2:?--clients needs a value}"; shift 2 ;;
    --accounts) accounts="${2:?--accounts needs a value}"; accounts_set=1; shift 2 ;;
    --keep) keep=1; shift ;;
    --profile) profile=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "postgres_bench: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
if (( quick )); then
  (( seconds_set )) || seconds=1
  (( accounts_set )) || accounts=1000
fi
for v in seconds clients accounts; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || { echo "postgres_bench: --$v must be a positive whole number" >&2; exit 2; }
done
IFS=, read -r -a instances <<<"$instances_list"
[[ ${#instances[@]} -gt 0 ]] || { echo "postgres_bench: --instances is empty" >&2; exit 2; }
for k in "${instances[@]}"; do
  [[ "$k" =~ ^[1-9][0-9]*$ && "$k" -le 64 ]] || { echo "postgres_bench: bad instance count '$k' (1 to 64)" >&2; exit 2; }
done

log() { echo "postgres_bench: $*" >&2; }
die() { echo "postgres_bench: $*" >&2; exit 1; }

# --- tools: installed if missing, like scripts/setup ------------------------------------------------
need_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    log "installing ${missing[*]}"
    local sudo=""
    [[ "$(id -u)" -eq 0 ]] || sudo="sudo"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
  fi
}
need_packages jq
[[ -x "$bench_bin" ]] || die "no ledger_bench at $bench_bin (scripts/bench postgres builds it)"
for b in psql pgbench postgres; do
  [[ -x "$PG_BIN/$b" ]] || die "no $PG_BIN/$b (install postgresql: scripts/setup --deps)"
done

# --- the throw-away server ----------------------------------------------------------------------------
work=$(mktemp -d /tmp/tollgate-pgbench.XXXXXX)
pg_dir=$(mktemp -d /tmp/tgpg.XXXXXX)  # short: the unix socket path must fit 107 bytes
chmod 0755 "$pg_dir"
failed=0
cleanup() {
  local status=$?
  "$root/scripts/pg" stop "$pg_dir" >/dev/null 2>&1 || true
  if [[ $status -eq 0 && $failed -eq 0 && $keep -eq 0 ]]; then
    rm -rf -- "$work" "$pg_dir"
  else
    cp "$pg_dir/postgres.log" "$work/" 2>/dev/null || true
    rm -rf -- "$pg_dir"
    log "outputs kept in $work"
  fi
  return $status
}
trap cleanup EXIT
trap 'exit 130' INT TERM

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
uri=$("$root/scripts/pg" start "$pg_dir")
log "started a throw-away server at $uri"
psql_c() { "$PG_BIN/psql" "$uri" -X -q -At -v ON_ERROR_STOP=1 -c "$1"; }
# Each tollgate cell starts on a fresh, empty schema, and the store prepares its statements once per
# connection: plans made while `holds` is nearly empty use sequential scans that grow with the run,
# until an ANALYZE replaces them. A long-running server gets that from autovacuum within a minute; a
# cell of a few seconds never would, and would measure stale plans (about half the throughput,
# docs/internals/benchmarks.md, "Stale plans"). So autovacuum analyzes quickly here, during the warm-up — for the
# baseline's tables too.
psql_c "ALTER SYSTEM SET autovacuum_naptime = '1s'"
psql_c "ALTER SYSTEM SET autovacuum_analyze_threshold = 500"
psql_c "ALTER SYSTEM SET autovacuum_analyze_scale_factor = 0"
psql_c "SELECT pg_reload_conf()" >/dev/null

# --- 1. the baseline ----------------------------------------------------------------------------------
log "baseline: pgbench, $clients clients, ${seconds} s per workload, $accounts spread accounts"
if ! "$here/baseline.sh" "$uri" --seconds "$seconds" --clients "$clients" --accounts "$accounts" >"$work/baseline.out"; then
  cat "$work/baseline.out" >&2
  failed=1
  log "the baseline failed its checks (or pgbench failed)"
fi
cat "$work/baseline.out" >&2
base_json=$(tail -n 1 "$work/baseline.out")
jq -e '.bench == "postgres_baseline"' >/dev/null 2>&1 <<<"$base_json" || die "no JSON line from baseline.sh"

# --- 2. tollgate, 1, 2, 3 instances -----------------------------------------------------------------
ledger_args=(--callers "$clients" --accounts "$accounts")
if (( quick )); then
  ledger_args+=(--quick)
  (( ! seconds_set )) || ledger_args+=(--seconds "$seconds")
else
  ledger_args+=(--seconds "$seconds" --warmup 2)  # 2 s: long enough for the first ANALYZE (above)
fi
: >"$work/ledger.jsonl"
for k in "${instances[@]}"; do
  psql_c 'CHECKPOINT' >/dev/null  # no checkpoint left over from the previous run
  log "tollgate: $k instance(s), $clients callers: ledger_bench ${ledger_args[*]} --instances $k"
  rc=0
  "$bench_bin" --database "$uri" --instances "$k" "${ledger_args[@]}" >"$work/ledger-$k.out" || rc=$?
  cat "$work/ledger-$k.out" >&2
  line=$(tail -n 1 "$work/ledger-$k.out")
  jq -e '.bench == "ledger_postgres"' >/dev/null 2>&1 <<<"$line" || die "ledger_bench ($k instances) failed (exit $rc) without its JSON line"
  if [[ $rc -ne 0 ]]; then
    failed=1
    log "ledger_bench ($k instances) exit $rc: a cell failed its checks"
  fi
  echo "$line" >>"$work/ledger.jsonl"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# --- --profile: the 1-instance hot cell once more, its libpq calls timed -----------------------------
if (( profile )); then
  log "profile: building bench/postgres/pq_timing.cc (LD_PRELOAD)"
  g++ -std=c++20 -O2 -shared -fPIC $(pkg-config --cflags libpq) -o "$work/pq_timing.so" "$here/pq_timing.cc" -ldl \
    || die "cannot build pq_timing.so"
  psql_c 'CHECKPOINT' >/dev/null
  log "profile: the 1-instance hot cell with pq_timing.so (not in the figures)"
  LD_PRELOAD="$work/pq_timing.so" "$bench_bin" --database "$uri" --instances 1 --workloads hot "${ledger_args[@]}" \
    >"$work/profile.out" 2>"$work/profile.err" || { failed=1; log "the profile run failed"; }
  cat "$work/profile.out" "$work/profile.err" >&2
fi

# --- the report -----------------------------------------------------------------------------------------
report=$(jq -n -c --argjson base "$base_json" --slurpfile runs "$work/ledger.jsonl" \
  --arg load_before "$load_before" --arg load_after "$load_after" --argjson clients "$clients" \
  --argjson accounts "$accounts" --argjson seconds "$seconds" --argjson quick "$quick" --argjson failed "$failed" '
  def r2: if . == null then null else (. * 100 | round) / 100 end;
  def ratio($a; $b): if $a == null or $b == null or $b == 0 then null else ($a / $b) | r2 end;
  def us_ms: if . == null then null else (. | round) / 1000 end;
  def r3: if . == null then null else (. * 1000 | round) / 1000 end;
  def single_pct($c): if $c.batches == null or $c.batches == 0 or $c.single_command_batches == null then null
                      else (100 * $c.single_command_batches / $c.batches | round) end;
  def cell($run; $w): [$run.cells[] | select(.workload == $w)] | first;
  ($runs | map(select(.instances == 1)) | first) as $one
  | ($one // {}) as $one
  | {bench: "postgres",
     hot_ratio: ratio($one.tollgate_lifecycles_per_s; $base.baseline_hot_lifecycles_per_s),
     spread_ratio: ratio($one.spread_tollgate_lifecycles_per_s; $base.baseline_spread_lifecycles_per_s),
     targets: {hot_ratio_min: 15, spread_ratio_min: 3, instances: 1},
     tollgate_hot_lifecycles_per_s: $one.tollgate_lifecycles_per_s,
     tollgate_spread_lifecycles_per_s: $one.spread_tollgate_lifecycles_per_s,
     baseline_hot_lifecycles_per_s: $base.baseline_hot_lifecycles_per_s,
     baseline_spread_lifecycles_per_s: $base.baseline_spread_lifecycles_per_s,
     tollgate_hot_p50_ms: ($one.p50_us | us_ms), tollgate_hot_p99_ms: ($one.p99_us | us_ms),
     tollgate_spread_p50_ms: ($one.spread_p50_us | us_ms), tollgate_spread_p99_ms: ($one.spread_p99_us | us_ms),
     baseline_hot_p50_ms: $base.baseline_hot_p50_ms, baseline_hot_p99_ms: $base.baseline_hot_p99_ms,
     baseline_spread_p50_ms: $base.baseline_spread_p50_ms, baseline_spread_p99_ms: $base.baseline_spread_p99_ms,
     by_instances: [$runs[] | . as $run | cell($run; "hot") as $h | cell($run; "spread") as $s | {
       instances: $run.instances,
       hot_lifecycles_per_s: $h.lifecycles_per_s, hot_p50_ms: ($h.p50_us | us_ms), hot_p99_ms: ($h.p99_us | us_ms),
       hot_avg_batch: $h.avg_batch, hot_single_command_batches_pct: single_pct($h), hot_batch_ms: ($h.batch_ms_mean | r3),
       hot_ratio: ratio($h.lifecycles_per_s; $base.baseline_hot_lifecycles_per_s),
       hot_vs_1_instance: ratio($h.lifecycles_per_s; $one.tollgate_lifecycles_per_s),
       spread_lifecycles_per_s: $s.lifecycles_per_s, spread_p50_ms: ($s.p50_us | us_ms), spread_p99_ms: ($s.p99_us | us_ms),
       spread_avg_batch: $s.avg_batch, spread_single_command_batches_pct: single_pct($s),
       spread_batch_ms: ($s.batch_ms_mean | r3),
       spread_ratio: ratio($s.lifecycles_per_s; $base.baseline_spread_lifecycles_per_s),
       spread_vs_1_instance: ratio($s.lifecycles_per_s; $one.spread_tollgate_lifecycles_per_s),
       verified: $run.verified}],
     clients: $clients, accounts: $accounts, seconds: $seconds, quick: ($quick == 1),
     server_version: $base.server_version, synchronous_commit: $base.synchronous_commit, fsync: $base.fsync,
     verified: ($failed == 0 and $base.checks_ok and all($runs[]; .verified)),
     load_before: $load_before, load_after: $load_after}
  | .targets_met = (.hot_ratio != null and .spread_ratio != null and .hot_ratio >= 15 and .spread_ratio >= 3)')

fmt() { [[ "$1" == null || -z "$1" ]] && echo - || echo "$1"; }
x() { [[ "$1" == null || -z "$1" ]] && echo - || echo "${1}x"; }
pct() { [[ "$1" == null || -z "$1" || "$1" == - ]] && echo - || echo "${1}%"; }
row() {  # row LABEL INSTANCES RATE P50 P99 AVG_BATCH SINGLE_PCT BATCH_MS RATIO
  printf '%-26s %9s %13s %9s %9s %9s %9s %9s %11s\n' "$1" "$(fmt "$2")" "$(fmt "$3")" "$(fmt "$4")" "$(fmt "$5")" \
    "$(fmt "$6")" "$(pct "$7")" "$(fmt "$8")" "$(x "$9")"
}
q() { jq -r "$1" <<<"$report"; }

printf '\ntollgate on PostgreSQL %s (synchronous_commit=%s, fsync=%s) against the pgbench baseline\n' \
  "$(q .server_version)" "$(q .synchronous_commit)" "$(q .fsync)"
printf '%d clients/callers, %s per run, %d spread accounts; load average %s before, %s after\n\n' \
  "$clients" "$( (( quick && ! seconds_set )) && echo "quick (1 s pgbench, 0.3 s tollgate windows)" || echo "${seconds} s")" \
  "$accounts" "$load_before" "$load_after"
printf '%-26s %9s %13s %9s %9s %9s %9s %9s %11s\n' run instances lifecycles/s 'p50 ms' 'p99 ms' 'avg batch' \
  'batches/1' 'batch ms' 'vs baseline'
for w in hot spread; do
  label_base="baseline $w (pgbench)"
  row "$label_base" - "$(q ".baseline_${w}_lifecycles_per_s")" "$(q ".baseline_${w}_p50_ms")" "$(q ".baseline_${w}_p99_ms")" - - - 1.00
  n=$(q '.by_instances | length')
  for ((i = 0; i < n; i++)); do
    row "tollgate $w" "$(q ".by_instances[$i].instances")" "$(q ".by_instances[$i].${w}_lifecycles_per_s")" \
      "$(q ".by_instances[$i].${w}_p50_ms")" "$(q ".by_instances[$i].${w}_p99_ms")" \
      "$(q ".by_instances[$i].${w}_avg_batch")" "$(q ".by_instances[$i].${w}_single_command_batches_pct")" \
      "$(q ".by_instances[$i].${w}_batch_ms")" \
      "$(q ".by_instances[$i].${w}_ratio")"
  done
done
printf '\n(avg batch = commands per group-commit transaction; batches/1 = share of the batches that held one command;\n'
printf ' batch ms = mean wall time of one batch, BEGIN to durable COMMIT)\n'
met() { awk -v v="$1" -v t="$2" 'BEGIN { print (v != "null" && v + 0 >= t) ? "met" : "NOT met" }'; }
printf 'targets, 1 instance: hot >= 15x the baseline: %s (%s); spread >= 3x: %s (%s)\n' \
  "$(x "$(q .hot_ratio)")" "$(met "$(q .hot_ratio)" 15)" "$(x "$(q .spread_ratio)")" "$(met "$(q .spread_ratio)" 3)"
printf 'checks (pgbench books, tollgate audit and sums after every cell): %s\n' \
  "$([[ "$(q .verified)" == true ]] && echo ok || echo FAILED)"
echo "$report"
[[ "$(q .verified)" == true ]] || exit 1
