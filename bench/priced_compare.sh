#!/usr/bin/env bash
# bench/priced_compare.sh — holds by feature against holds by amount, one build, same minutes.
#
#   bench/priced_compare.sh --bench BIN [--rounds N] [--out DIR] -- [ledger_bench args]
#
# Runs, interleaved, N rounds of: ledger_bench with the given args (every reservation by amount),
# then the same with --priced (every reservation by feature: the batch reads the feature's price
# and writes the hold's priced row; the same credit moves). Each run's last line (its JSON object)
# goes to DIR/plain-R.json and DIR/priced-R.json, the load average before each run to
# DIR/uptime.txt. Then it prints, per workload and caller count of the tollgate cells, every round's
# lifecycles/s of each and the ratio of the means (priced / plain; the issue's aim: within 15%,
# ratio >= 0.85). Each run checks its own results (audit clean, counts match): a failed run stops
# this script.
#
# Example (a Release build; docs/internals/benchmarks.md "Prices"):
#   bench/priced_compare.sh --bench build-release/ledger_bench --rounds 3 -- \
#     --workloads hot --impls tollgate --callers 1,64 --seconds 3 [--database postgresql://…]
set -euo pipefail

bench="" rounds=2 out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bench) bench="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "priced_compare: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -x "$bench" ]] || { echo "priced_compare: --bench must be a ledger_bench program" >&2; exit 2; }
command -v jq >/dev/null || { echo "priced_compare: needs jq" >&2; exit 2; }
out="${out:-$(mktemp -d "${TMPDIR:-/tmp}/priced-compare-XXXXXX")}"
mkdir -p "$out"
: >"$out/uptime.txt"

run() {  # run NAME ARGS...
  local name="$1"
  shift
  echo "$name $(date -u +%FT%TZ) $(uptime)" | tee -a "$out/uptime.txt" >&2
  "$bench" "$@" >"$out/$name.log"
  tail -n 1 "$out/$name.log" >"$out/$name.json"
  jq -e '.verified == true' "$out/$name.json" >/dev/null || { echo "priced_compare: $name did not verify" >&2; exit 1; }
}
for ((r = 1; r <= rounds; r++)); do
  run "plain-$r" "$@"
  run "priced-$r" "$@" --priced
done
echo "end $(date -u +%FT%TZ) $(uptime)" | tee -a "$out/uptime.txt" >&2

jq -rs '
  (map(select(.priced == false))) as $plain
  | (map(select(.priced == true))) as $priced
  | def rates($runs; $w; $c): [ $runs[] | .cells[] | select(.impl == "tollgate" and .workload == $w and .callers == $c)
                                 | .lifecycles_per_s ];
    def mean: if length == 0 then null else (add / length) end;
    def fmt: map(round | tostring) | join(" / ");
  [ $plain[0].cells[] | select(.impl == "tollgate") | {w: .workload, c: .callers} ] | unique[]
  | . as $k
  | (rates($plain; $k.w; $k.c)) as $a
  | (rates($priced; $k.w; $k.c)) as $b
  | "\($k.w) \($k.c) callers: plain \($a | fmt) (mean \($a | mean | round)); priced \($b | fmt) (mean \($b | mean | round)); priced/plain \(($b | mean) / ($a | mean) * 1000 | round / 1000)"
' "$out"/plain-*.json "$out"/priced-*.json
echo "(runs' logs and JSON lines in $out)"
