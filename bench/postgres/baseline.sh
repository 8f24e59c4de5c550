#!/usr/bin/env bash
# bench/postgres/baseline.sh — the textbook PostgreSQL baseline of `scripts/bench postgres`:
# durable reserve+commit lifecycles per second with one transaction per lifecycle, measured by pgbench.
#
#   bench/postgres/baseline.sh [URI] [--seconds S] [--clients C] [--threads J] [--accounts N] [--keep]
#
# URI is a libpq URI (else $PGURI; else a throw-away server is started with scripts/pg in a temp
# folder under /tmp and stopped afterwards). In the schema `pgbench_baseline` (dropped and made anew)
# it creates accounts(id, available, reserved, used): N accounts (default 10,000), each with 10^15
# available credits (effectively unlimited); account 1 is the hot one. Then it runs
# `pgbench -n -M prepared -c C -j J -T S` (defaults 64 clients, 2 threads, 10 s) twice, with the
# custom script (one transaction = one lifecycle):
#
#   BEGIN;
#   UPDATE accounts SET available = available - 1, reserved = reserved + 1
#     WHERE id = :id AND available >= 1 RETURNING available;
#   UPDATE accounts SET reserved = reserved - 1, used = used + 1 WHERE id = :id;
#   COMMIT;
#
# hot: :id = 1 always; spread: \set id random(1, N). Latency p50/p99 come from pgbench's
# per-transaction log (--log, into a temp folder). After each run it checks that every account's
# available + reserved + used is unchanged, that nothing is left reserved, that `used` grew by exactly
# the transactions pgbench counted, and that pgbench saw no failed transaction; any mismatch fails the
# run (exit 1). The server's settings are shown with the results (synchronous_commit must be on).
#
# Output (stdout): a table, then as the LAST line one JSON object (baseline_hot_lifecycles_per_s,
# baseline_spread_lifecycles_per_s, baseline_{hot,spread}_{p50,p99}_ms, counts, settings, load).
# The schema is dropped at the end unless --keep. Environment: PGURI, PG_BIN (default
# /usr/lib/postgresql/15/bin).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
PG_BIN="${PG_BIN:-/usr/lib/postgresql/15/bin}"
export LC_ALL=C  # number formats of printf/awk/sort

usage() { sed -n '2,6s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }

uri="${PGURI:-}"
seconds=10 clients=64 threads=2 accounts=10000 keep=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="${2:?--seconds needs a value}"; shift 2 ;;
    --clients) clients="${2:?--clients needs a value}"; shift 2 ;;
    --threads) threads="${2:?--threads needs a value}"; shift 2 ;;
    --accounts) accounts="${2:?--accounts needs a value}"; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "baseline: unknown option '$1'" >&2; usage >&2; exit 2 ;;
    *) uri="$1"; shift ;;
  esac
done
for v in seconds clients threads accounts; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || { echo "baseline: --$v must be a positive whole number" >&2; exit 2; }
done
for b in psql pgbench; do
  [[ -x "$PG_BIN/$b" ]] || { echo "baseline: no $PG_BIN/$b (install postgresql: scripts/setup --deps)" >&2; exit 2; }
done

work=$(mktemp -d /tmp/pgbench-baseline.XXXXXX)
pg_dir=""
cleanup() {
  local status=$?
  if [[ -n "$pg_dir" ]]; then "$root/scripts/pg" stop "$pg_dir" >/dev/null 2>&1 || true; fi
  if [[ $status -eq 0 ]]; then
    rm -rf -- "$work" ${pg_dir:+"$pg_dir"}
  else
    echo "baseline: pgbench outputs kept in $work${pg_dir:+, server in $pg_dir}" >&2
  fi
  return $status
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ -z "$uri" ]]; then
  pg_dir=$(mktemp -d /tmp/pgbench-baseline-pg.XXXXXX)
  chmod 0755 "$pg_dir"
  uri=$("$root/scripts/pg" start "$pg_dir")
  echo "baseline: started a throw-away server at $uri" >&2
fi

sql() { PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning" "$PG_BIN/psql" "$uri" -X -q -At -v ON_ERROR_STOP=1 "$@"; }
sync_commit=$(sql -c 'SHOW synchronous_commit')
fsync=$(sql -c 'SHOW fsync')
server_version=$(sql -c 'SHOW server_version')
[[ "$sync_commit" == on && "$fsync" == on ]] \
  || echo "baseline: WARNING: synchronous_commit=$sync_commit fsync=$fsync — commits are not durable, figures are not comparable" >&2

echo "baseline: creating $accounts accounts in schema pgbench_baseline" >&2
sql <<SQL
DROP SCHEMA IF EXISTS pgbench_baseline CASCADE;
CREATE SCHEMA pgbench_baseline;
SET search_path = pgbench_baseline;
CREATE TABLE accounts (
  id        integer PRIMARY KEY,
  available bigint NOT NULL,
  reserved  bigint NOT NULL,
  used      bigint NOT NULL
);
INSERT INTO accounts SELECT i, 1000000000000000, 0, 0 FROM generate_series(1, $accounts) AS i;
-- What every account must still hold (available + reserved + used) after the runs.
CREATE TABLE initial AS SELECT id, available + reserved + used AS total FROM accounts;
VACUUM ANALYZE accounts;
SQL

lifecycle='BEGIN;
UPDATE pgbench_baseline.accounts SET available = available - 1, reserved = reserved + 1 WHERE id = :id AND available >= 1 RETURNING available;
UPDATE pgbench_baseline.accounts SET reserved = reserved - 1, used = used + 1 WHERE id = :id;
COMMIT;'
printf '\\set id 1\n%s\n' "$lifecycle" >"$work/hot.sql"
printf '\\set id random(1, %d)\n%s\n' "$accounts" "$lifecycle" >"$work/spread.sql"

# check_books LABEL EXPECTED_USED — the sanity checks after a run; prints the failures.
check_books() {
  local label=$1 expected=$2 changed reserved used negative
  changed=$(sql -c 'SELECT count(*) FROM pgbench_baseline.accounts a JOIN pgbench_baseline.initial i USING (id)
                   WHERE a.available + a.reserved + a.used <> i.total')
  reserved=$(sql -c 'SELECT coalesce(sum(reserved), 0) FROM pgbench_baseline.accounts')
  negative=$(sql -c 'SELECT count(*) FROM pgbench_baseline.accounts WHERE available < 0 OR reserved < 0 OR used < 0')
  used=$(sql -c 'SELECT coalesce(sum(used), 0) FROM pgbench_baseline.accounts')
  [[ "$changed" == 0 ]] || echo "$label: $changed accounts' available + reserved + used changed"
  [[ "$reserved" == 0 ]] || echo "$label: $reserved credits left reserved"
  [[ "$negative" == 0 ]] || echo "$label: $negative accounts with a negative balance"
  [[ "$used" == "$expected" ]] || echo "$label: used is $used, expected $expected (the lifecycles pgbench counted)"
}

# percentile_ms P < latencies-in-µs (sorted) → the P-th percentile in ms, 3 decimals.
percentile_ms() {
  awk -v p="$1" '{ v[NR] = $1 } END { if (NR == 0) { print "null"; exit }
    i = int(p / 100 * NR + 0.999999); if (i < 1) i = 1; if (i > NR) i = NR; printf "%.3f\n", v[i] / 1000 }'
}

failures=()
declare -A tps count failed p50 p99 avg
used_total=0
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for w in hot spread; do
  sql -c 'CHECKPOINT' >/dev/null  # no checkpoint left over from loading or the previous run
  echo "baseline: $w — pgbench -n -M prepared -c $clients -j $threads -T $seconds" >&2
  mkdir -p "$work/log-$w"
  # pgbench as-is; its output is kept, and parsed below.
  if ! (cd "$work/log-$w" && "$PG_BIN/pgbench" -n -M prepared -c "$clients" -j "$threads" -T "$seconds" \
          -f "$work/$w.sql" --log --log-prefix="$work/log-$w/tx" "$uri") >"$work/$w.out" 2>"$work/$w.err"; then
    cat "$work/$w.out" "$work/$w.err" >&2
    echo "baseline: pgbench failed ($w)" >&2
    exit 1
  fi
  tps[$w]=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)$/\1/p' "$work/$w.out")
  [[ -z "${tps[$w]}" ]] || tps[$w]=$(printf '%.1f' "${tps[$w]}")
  count[$w]=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$work/$w.out")
  failed[$w]=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$work/$w.out")
  avg[$w]=$(sed -n 's/^latency average = \([0-9.]*\) ms$/\1/p' "$work/$w.out")
  [[ -n "${tps[$w]}" && -n "${count[$w]}" ]] || { cat "$work/$w.out" >&2; echo "baseline: cannot read pgbench's output ($w)" >&2; exit 1; }
  failed[$w]=${failed[$w]:-0}
  [[ "${failed[$w]}" == 0 ]] || failures+=("$w: pgbench reports ${failed[$w]} failed transactions")
  # Per-transaction log: client_id transaction_no time_us script_no epoch epoch_us; only completed ones.
  cat "$work/log-$w"/tx.* | awk '$3 ~ /^[0-9]+$/ { print $3 }' | sort -n >"$work/$w.lat"
  logged=$(wc -l <"$work/$w.lat")
  [[ "$logged" == "${count[$w]}" ]] || failures+=("$w: the per-transaction log holds $logged transactions, pgbench counted ${count[$w]}")
  p50[$w]=$(percentile_ms 50 <"$work/$w.lat")
  p99[$w]=$(percentile_ms 99 <"$work/$w.lat")
  used_total=$((used_total + ${count[$w]}))
  while IFS= read -r f; do [[ -z "$f" ]] || failures+=("$f"); done < <(check_books "$w" "$used_total")
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
hot_used=$(sql -c 'SELECT used FROM pgbench_baseline.accounts WHERE id = 1')
spread_accounts_touched=$(sql -c 'SELECT count(*) FROM pgbench_baseline.accounts WHERE used > 0')
[[ $keep -eq 1 ]] || sql -c 'DROP SCHEMA pgbench_baseline CASCADE'

printf '\nPostgreSQL %s baseline (synchronous_commit=%s, fsync=%s): one transaction per reserve+commit lifecycle,\n' \
  "$server_version" "$sync_commit" "$fsync"
printf 'pgbench -n -M prepared -c %d -j %d -T %d; load average %s before, %s after\n\n' \
  "$clients" "$threads" "$seconds" "$load_before" "$load_after"
printf '%-28s %14s %12s %10s %10s %10s\n' workload lifecycles/s lifecycles 'avg ms' 'p50 ms' 'p99 ms'
printf '%-28s %14s %12s %10s %10s %10s\n' 'hot (account 1)' "${tps[hot]}" "${count[hot]}" "${avg[hot]:-?}" "${p50[hot]}" "${p99[hot]}"
printf '%-28s %14s %12s %10s %10s %10s\n' "spread ($accounts accounts)" "${tps[spread]}" "${count[spread]}" "${avg[spread]:-?}" "${p50[spread]}" "${p99[spread]}"
printf '\nchecks: available + reserved + used unchanged on every account, nothing left reserved, used = %d (account 1: %d; %d accounts used at all): %s\n' \
  "$used_total" "$hot_used" "$spread_accounts_touched" "$([[ ${#failures[@]} -eq 0 ]] && echo ok || echo FAILED)"
if [[ ${#failures[@]} -gt 0 ]]; then
  printf 'baseline: CHECK FAILED: %s\n' "${failures[@]}" >&2
fi

num() { [[ -n "$1" ]] && echo "$1" || echo null; }
printf '{"bench":"postgres_baseline","server_version":"%s","synchronous_commit":"%s","fsync":"%s","clients":%d,"threads":%d,"seconds":%d,"accounts":%d,' \
  "$server_version" "$sync_commit" "$fsync" "$clients" "$threads" "$seconds" "$accounts"
printf '"baseline_hot_lifecycles_per_s":%s,"baseline_spread_lifecycles_per_s":%s,' "$(num "${tps[hot]}")" "$(num "${tps[spread]}")"
printf '"baseline_hot_p50_ms":%s,"baseline_hot_p99_ms":%s,"baseline_spread_p50_ms":%s,"baseline_spread_p99_ms":%s,' \
  "${p50[hot]}" "${p99[hot]}" "${p50[spread]}" "${p99[spread]}"
printf '"baseline_hot_lifecycles":%d,"baseline_spread_lifecycles":%d,"checks_ok":%s,"load_before":"%s","load_after":"%s"}\n' \
  "${count[hot]}" "${count[spread]}" "$([[ ${#failures[@]} -eq 0 ]] && echo true || echo false)" "$load_before" "$load_after"
[[ ${#failures[@]} -eq 0 ]] || exit 1
