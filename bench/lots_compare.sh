#!/usr/bin/env bash
# bench/lots_compare.sh — credit lots against the ledger before lots, same machine, same minutes.
#
#   bench/lots_compare.sh --base BIN --new BIN [--rounds N] [--lots LIST] [--out DIR] -- [ledger_bench args]
#
# Runs, interleaved, N rounds of: the base build's ledger_bench (a build of the commit before credit
# lots: it knows no --lots, each account is one plain credit) with the given args, then the new
# build's ledger_bench with the same args plus --lots LIST (default 1,20). Each run's last line (its
# JSON object) goes to DIR/base-R.json and DIR/new-R.json, the load average before each run to
# DIR/uptime.txt. Then it prints, per workload and caller count, every round's lifecycles/s of the
# base and of each lot count, and the ratios of the means: each lot count against the base, and the
# last lot count against the first (the issue's aim: at most 10% lost, ratio >= 0.9).
# Both programs check their own results (audit clean, counts match): a failed run stops this script.
#
# Example (Release builds of both; see docs/internals/benchmarks.md "Credit lots"):
#   bench/lots_compare.sh --base ../wt-bench-base/build-release/ledger_bench \
#     --new build-release/ledger_bench --rounds 2 -- --workloads hot --impls tollgate --callers 1,64 --seconds 3
set -euo pipefail

base="" new="" rounds=2 lots="1,20" out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --base) base="$2"; shift 2 ;;
    --new) new="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --lots) lots="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "lots_compare: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -x "$base" && -x "$new" ]] || { echo "lots_compare: --base and --new must be ledger_bench programs" >&2; exit 2; }
command -v jq >/dev/null || { echo "lots_compare: needs jq" >&2; exit 2; }
out="${out:-$(mktemp -d "${TMPDIR:-/tmp}/lots-compare-XXXXXX")}"
mkdir -p "$out"
: >"$out/uptime.txt"

run() {  # run NAME BIN ARGS...
  local name="$1" bin="$2"
  shift 2
  echo "$name $(date -u +%FT%TZ) $(uptime)" | tee -a "$out/uptime.txt" >&2
  "$bin" "$@" >"$out/$name.log"
  tail -n 1 "$out/$name.log" >"$out/$name.json"
}
for ((r = 1; r <= rounds; r++)); do
  run "base-$r" "$base" "$@"
  run "new-$r" "$new" "$@" --lots "$lots"
done
echo "end $(date -u +%FT%TZ) $(uptime)" | tee -a "$out/uptime.txt" >&2

# One row per (workload, callers) of the tollgate cells: base rates, each lot count's rates, ratios.
jq -rs --arg lots "$lots" '
  ($lots | split(",") | map(tonumber)) as $ls
  | (map(select(has("lots") | not)) ) as $bases
  | (map(select(has("lots")))) as $news
  | def rates($runs; $w; $c; $n):
      [ $runs[] | .cells[] | select(.impl == "tollgate" and .workload == $w and .callers == $c
                                    and (($n == null) or (.lots == $n))) | .lifecycles_per_s ];
    def mean: if length == 0 then null else (add / length) end;
    def r3: if . == null then "-" else (. * 1000 | round / 1000 | tostring) end;
    def fmt: map(round | tostring) | join(" / ");
  [ $bases[0].cells[] | select(.impl == "tollgate") | {w: .workload, c: .callers} ] | unique[]
  | . as $k
  | (rates($bases; $k.w; $k.c; null)) as $b
  | [ $ls[] as $n | {n: $n, r: rates($news; $k.w; $k.c; $n)} ] as $per
  | "\($k.w) \($k.c) callers: base \($b | fmt) (mean \($b | mean | round))"
    + ([ $per[] | "; \(.n) lots \(.r | fmt) (mean \(.r | mean | round), \((.r | mean) / ($b | mean) | r3)x base)" ] | join(""))
    + "; \($ls[-1]) lots / \($ls[0]) lots \((($per[-1].r | mean) / ($per[0].r | mean)) | r3)"
' "$out"/base-*.json "$out"/new-*.json
echo "(runs' logs and JSON lines in $out)"
