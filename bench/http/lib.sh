# bench/http/lib.sh — what the HTTP benches share (http_bench.sh, coord_bench.sh); sourced, never run.
#
# The sourcing script sets, before calling anything here:
#   bench_name   its name in messages ("http_bench")
#   root         the repository; bin the tollgate binary
#   connections  wrk connections and redis-benchmark clients; threads wrk threads; quick 0|1
# and gets: log/die, need_packages, a work folder on a real disk (pick_dir), redis-server and
# `tollgate serve` started and stopped (start_redis, start_tollgate, stop_servers), admin calls
# (api, bulk), the server's counters (/metrics), CPU accounting, the disk's flush latency
# (probe_fsync), a measured wrk run (wrk_measure) and a measured redis-benchmark INCR run
# (redis_incr). Figures go into the associative array R[workload.key]; workloads run are appended
# to `order`; problems found are appended to `failures`.

declare -A R
order=()
failures=()

log() { echo "$bench_name: $*" >&2; }
die() { echo "$bench_name: $*" >&2; exit 1; }

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

# --- the folder: on a real disk (durable numbers), unless --allow-tmpfs ------------------------------
fs_type() { stat -f -c %T "$1" 2>/dev/null || echo unknown; }
is_memory_fs() { case "$(fs_type "$1")" in tmpfs|ramfs) return 0 ;; *) return 1 ;; esac; }
# pick_dir DIR ALLOW_TMPFS — sets dir (absolute), created_dir (1 if made here) and fs; exits 2 when
# DIR is on a memory file system (and that was not allowed) or no real disk is writable.
pick_dir() {
  local wanted=$1 allow=$2 probe base
  dir="" created_dir=0
  if [[ -n "$wanted" ]]; then
    probe="$wanted"
    while [[ ! -e "$probe" ]]; do probe="$(dirname "$probe")"; done
    if is_memory_fs "$probe" && (( ! allow )); then
      echo "$bench_name: $wanted is on $(fs_type "$probe"): commits would not be durable; pass another --dir" >&2
      exit 2
    fi
    mkdir -p "$wanted"
    dir="$(cd "$wanted" && pwd)"
  else
    for base in "${TMPDIR:-}" /var/tmp /tmp "$root"; do
      [[ -n "$base" && -d "$base" && -w "$base" ]] || continue
      is_memory_fs "$base" && continue
      dir="$(mktemp -d "$base/tollgate-$bench_name-XXXXXX")" && created_dir=1 && break
    done
    [[ -n "$dir" ]] || { echo "$bench_name: no writable folder on a real disk; pass --dir" >&2; exit 2; }
  fi
  fs="$(fs_type "$dir")"
  chmod 700 "$dir"
}

# --- processes ---------------------------------------------------------------------------------------
tollgate_pid=""
redis_pid=""
stop_pid() {  # stop_pid PID — SIGTERM and wait (a graceful stop); fine if it is gone
  [[ -n "$1" ]] && kill -0 "$1" 2>/dev/null || return 0
  kill -TERM "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
stop_servers() { stop_pid "$tollgate_pid"; tollgate_pid=""; stop_pid "$redis_pid"; redis_pid=""; }

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# redis-server: private port, no persistence. Sets redis_port and redis_pid.
start_redis() {
  local attempt port i
  for attempt in 1 2 3 4 5; do
    port=$(( 20000 + RANDOM % 40000 ))
    port_in_use "$port" && continue
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
      --logfile "$dir/redis.log" --daemonize no --protected-mode yes >/dev/null 2>&1 &
    redis_pid=$!
    for i in $(seq 50); do
      if [[ "$(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null)" == "PONG" ]]; then
        redis_port=$port
        return 0
      fi
      kill -0 "$redis_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
    redis_pid=""
  done
  die "redis-server did not start (see $dir/redis.log)"
}

# The admin key: random per run, read by the Lua scripts from the environment.
admin_key="bench-$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"
export TOLLGATE_BENCH_KEY="$admin_key"

# start_tollgate LOG_NAME [serve args...] — `tollgate serve` on port 0 (the kernel picks a free one;
# the server logs it), logs in $dir/LOG_NAME.log. Sets tollgate_pid, tollgate_port and base_url.
start_tollgate() {
  local name=$1 i
  shift
  TOLLGATE_ADMIN_KEY="$admin_key" "$bin" serve --listen 127.0.0.1:0 "$@" \
    >"$dir/$name.stdout" 2>"$dir/$name.log" &
  tollgate_pid=$!
  for i in $(seq 300); do
    tollgate_port="$(grep -m1 -o 'listening on 127\.0\.0\.1:[0-9]*' "$dir/$name.log" 2>/dev/null | sed 's/.*://' || true)"
    if [[ -n "$tollgate_port" ]]; then
      base_url="http://127.0.0.1:$tollgate_port"
      curl -fsS "$base_url/healthz" >/dev/null && return 0
    fi
    kill -0 "$tollgate_pid" 2>/dev/null || break
    sleep 0.1
  done
  head -5 "$dir/$name.log" >&2 || true
  die "tollgate did not start"
}

api() {  # api METHOD PATH [BODY] → the body on stdout; fails on non-2xx
  local method=$1 path=$2 body=${3:-}
  local args=(-sS -X "$method" -H "Authorization: Bearer $admin_key" -w '\n%{http_code}')
  [[ -n "$body" ]] && args+=(-H 'Content-Type: application/json' --data-binary "$body")
  local out code
  out="$(curl "${args[@]}" "$base_url$path")" || die "$method $path: curl failed"
  code="${out##*$'\n'}"
  out="${out%$'\n'*}"
  [[ "$code" == 2?? ]] || die "$method $path answered $code: $out"
  printf '%s' "$out"
}

json_int() {  # json_int KEY < JSON → the integer value of "KEY" (first occurrence)
  grep -o "\"$1\":-\?[0-9]*" | head -1 | sed 's/.*://'
}

# Many admin calls in parallel over keep-alive (curl --parallel); every answer must be 201.
# bulk NAME: reads "PATH<TAB>BODY" lines on stdin; prints how many were answered.
bulk() {
  local name=$1 cfg="$dir/$1.curl"
  : >"$cfg"
  chmod 600 "$cfg"
  local path body sep=""
  while IFS=$'\t' read -r path body; do
    # "next" separates transfers; a trailing one would be an empty transfer that aborts them all.
    printf '%surl = "%s%s"\nheader = "Authorization: Bearer %s"\nheader = "Content-Type: application/json"\ndata-binary = "%s"\noutput = "/dev/null"\nwrite-out = "%%{http_code}\\n"\n' \
      "$sep" "$base_url" "$path" "$admin_key" "${body//\"/\\\"}" >>"$cfg"
    sep=$'next\n'
  done
  curl -sS --no-progress-meter --parallel --parallel-immediate --parallel-max "$connections" -K "$cfg" >"$dir/$name.codes" \
    || die "$name: curl failed"
  local total bad
  total=$(wc -l <"$dir/$name.codes")
  bad=$(grep -vc '^201$' "$dir/$name.codes" || true)
  (( bad == 0 )) || die "$name: $bad of $total answers were not 201: $(sort "$dir/$name.codes" | uniq -c | tr '\n' ' ')"
  echo "$total"
}

# --- server-side counters (/metrics) -----------------------------------------------------------------
metrics_snapshot() { curl -fsS "$base_url/metrics" >"$1" || die "GET /metrics failed"; }
# server_count FILE ROUTE CLASS — requests answered for ROUTE with a status in CLASS
# (2xx | non2xx | any | a status code such as 409)
server_count() {
  awk -v route="$2" -v class="$3" '
    /^tollgate_http_requests_total\{/ {
      match($0, /route="[^"]*"/); r = substr($0, RSTART + 7, RLENGTH - 8)
      match($0, /status="[0-9]*"/); s = substr($0, RSTART + 8, RLENGTH - 9) + 0
      if (r != route) next
      if (class == "2xx" && (s < 200 || s > 299)) next
      if (class == "non2xx" && s >= 200 && s <= 299) next
      if (class ~ /^[0-9]+$/ && s != class + 0) next
      n += $NF
    }
    END { printf "%d\n", n }' "$1"
}
# metric_value FILE SERIES — the value of one series, written as in the file (name{labels}); 0 if absent
metric_value() { awk -v name="$2" '$1 == name { printf "%d\n", $2; found = 1 } END { if (!found) print 0 }' "$1"; }
# Everything answered so far, except /metrics itself.
server_total() { awk '/^tollgate_http_requests_total\{/ && !/route="GET \/metrics"/ { n += $NF } END { printf "%d\n", n }' "$1"; }

# After wrk stops, the requests it had in flight are still answered (and written): wait for that.
wait_quiescent() {
  local prev=-1 now i
  for i in $(seq 100); do
    metrics_snapshot "$dir/metrics.q"
    now=$(server_total "$dir/metrics.q")
    if (( now == prev )) && (( $(metric_value "$dir/metrics.q" tollgate_write_queue_depth) == 0 )); then return 0; fi
    prev=$now
    sleep 0.1
  done
  die "the server did not settle after a run"
}

# --- CPU: a process's user+system time in microseconds; the machine's busy and total jiffies ---------
clk_tck=$(getconf CLK_TCK 2>/dev/null || echo 100)
proc_cpu_us() { awk -v hz="$clk_tck" '{ printf "%.0f\n", ($14 + $15) * 1e6 / hz }' "/proc/$1/stat"; }
machine_jiffies() { awk '/^cpu / { idle = $5 + $6; total = 0; for (i = 2; i <= NF; i++) total += $i; print total - idle, total; exit }' /proc/stat; }
busy_percent() {  # busy_percent "BUSY0 TOTAL0" "BUSY1 TOTAL1"
  awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " "); t = y[2] - x[2]; printf "%.0f\n", (t > 0 ? 100 * (y[1] - x[1]) / t : 0) }'
}

# The disk's flush latency where the database goes: each durable answer waits for at least one
# flush, so C connections that each wait for their answer (a closed loop) get at most
# C / flush-latency durable answers per second, whatever the server does. Sets fsync_ms and
# closed_loop_bound.
probe_fsync() {
  local writes=$(( quick ? 20 : 100 )) seconds
  seconds=$(LC_ALL=C dd if=/dev/zero of="$dir/fsync.probe" bs=4k count="$writes" oflag=dsync 2>&1 \
    | awk '/copied/ { for (i = 1; i <= NF; i++) if ($i ~ /^s,?$/) print $(i - 1) }' | tail -1)
  rm -f "$dir/fsync.probe"
  fsync_ms=$(awk -v s="${seconds:-0}" -v n="$writes" 'BEGIN { printf "%.2f", 1000 * s / n }')
  closed_loop_bound=$(awk -v ms="$fsync_ms" -v c="$connections" 'BEGIN { printf "%.0f", (ms > 0 ? c * 1000 / ms : 0) }')
}

# wrk_measure NAME LABEL SCRIPT DURATION [script args...] — one wrk run against base_url with the Lua
# SCRIPT of bench/http/, between two quiet moments of the server. Sets R[NAME.*]: every key=value
# of the script's "TOLLGATE_WRK …" line (requests, duration_us, p50_us, p99_us, errors by socket
# kind, …), rps, machine_busy_pct, server_cpu_us, answered (every request the server answered during
# the run, from its counters), cpu_us_per_req and server_cores; $dir/metrics.before and
# $dir/metrics.after hold the counters around the run. A NAME ending in _perf is not added to `order`.
wrk_measure() {
  local name=$1 label=$2 script=$3 duration=$4
  shift 4
  [[ $name == *_perf ]] || order+=("$name")
  R[$name.label]=$label
  wait_quiescent
  cp "$dir/metrics.q" "$dir/metrics.before"
  log "$label: wrk -t$threads -c$connections -d${duration}s"
  local cpu0 jiffies0 line kv
  cpu0=$(proc_cpu_us "$tollgate_pid")
  jiffies0=$(machine_jiffies)
  wrk -t"$threads" -c"$connections" -d"${duration}s" --timeout 10s -s "$root/bench/http/$script" "$base_url" -- "$@" \
    >"$dir/$name.wrk.txt" 2>&1 || die "$label: wrk failed: $(tail -3 "$dir/$name.wrk.txt")"
  R[$name.machine_busy_pct]=$(busy_percent "$jiffies0" "$(machine_jiffies)")
  R[$name.server_cpu_us]=$(( $(proc_cpu_us "$tollgate_pid") - cpu0 ))
  line="$(grep -m1 '^TOLLGATE_WRK ' "$dir/$name.wrk.txt")" || die "$label: no result line from wrk: $(tail -5 "$dir/$name.wrk.txt")"
  for kv in ${line#TOLLGATE_WRK }; do R[$name.${kv%%=*}]=${kv#*=}; done
  wait_quiescent
  cp "$dir/metrics.q" "$dir/metrics.after"
  R[$name.answered]=$(( $(server_total "$dir/metrics.after") - $(server_total "$dir/metrics.before") ))
  local d=${R[$name.duration_us]}
  R[$name.rps]=$(awk -v n="${R[$name.requests]}" -v d="$d" 'BEGIN { printf "%.1f", n / (d / 1e6) }')
  R[$name.cpu_us_per_req]=$(awk -v c="${R[$name.server_cpu_us]}" -v n="${R[$name.answered]}" 'BEGIN { printf "%.1f", (n > 0 ? c / n : 0) }')
  R[$name.server_cores]=$(awk -v c="${R[$name.server_cpu_us]}" -v d="$d" 'BEGIN { printf "%.2f", c / d }')
  R[$name.socket_errors]=$(( R[$name.sock_connect] + R[$name.sock_read] + R[$name.sock_write] + R[$name.sock_timeout] ))
}

# redis_incr NAME — redis-benchmark -t incr -c $connections against the running redis-server, sized
# by a short pilot to last about $seconds; checks the counter. Sets R[NAME.*] (rps, requests,
# p50_us, p99_us, cpu_us_per_req of redis-server, server_cores, machine_busy_pct, errors).
redis_incr() {
  local name=$1 pilot_n pilot pilot_rps n started cpu0 jiffies0 wall line rps p50 p99 counter
  log "redis INCR: pilot"
  pilot_n=$(( quick ? 5000 : 50000 ))
  pilot="$(redis-benchmark -h 127.0.0.1 -p "$redis_port" -t incr -c "$connections" -n "$pilot_n" --csv 2>/dev/null | grep '^"INCR"')" \
    || die "redis-benchmark pilot failed"
  pilot_rps=$(echo "$pilot" | cut -d, -f2 | tr -d '"')
  n=$(awk -v r="$pilot_rps" -v s="$seconds" 'BEGIN { n = int(r * s); if (n < 10000) n = 10000; print n }')
  redis-cli -h 127.0.0.1 -p "$redis_port" del 'counter:__rand_int__' >/dev/null
  log "redis INCR: redis-benchmark -t incr -c $connections -n $n"
  started=$(date +%s.%N)
  cpu0=$(proc_cpu_us "$redis_pid")
  jiffies0=$(machine_jiffies)
  redis-benchmark -h 127.0.0.1 -p "$redis_port" -t incr -c "$connections" -n "$n" --csv >"$dir/$name.csv" 2>/dev/null \
    || die "redis-benchmark failed"
  wall=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  R[$name.machine_busy_pct]=$(busy_percent "$jiffies0" "$(machine_jiffies)")
  R[$name.server_cpu_us]=$(( $(proc_cpu_us "$redis_pid") - cpu0 ))
  R[$name.cpu_us_per_req]=$(awk -v c="${R[$name.server_cpu_us]}" -v n="$n" 'BEGIN { printf "%.1f", c / n }')
  R[$name.server_cores]=$(awk -v c="${R[$name.server_cpu_us]}" -v w="$wall" 'BEGIN { printf "%.2f", c / (w * 1e6) }')
  line="$(grep '^"INCR"' "$dir/$name.csv")" || die "redis-benchmark printed no INCR line"
  IFS=, read -r _ rps _ _ p50 _ p99 _ <<<"$(echo "$line" | tr -d '"')"
  counter=$(redis-cli -h 127.0.0.1 -p "$redis_port" get 'counter:__rand_int__')
  (( counter == n )) || failures+=("redis: the counter is $counter, expected $n")
  order+=("$name")
  R[$name.label]="redis INCR (non-durable)"
  R[$name.rps]=$rps
  R[$name.requests]=$n
  R[$name.p50_us]=$(awk -v v="$p50" 'BEGIN { printf "%d", v * 1000 }')
  R[$name.p99_us]=$(awk -v v="$p99" 'BEGIN { printf "%d", v * 1000 }')
  R[$name.errors]=0
}

ms() { awk -v us="$1" 'BEGIN { printf "%.2f", us / 1000 }'; }
thousands() { LC_ALL=C printf "%'.0f" "$1" 2>/dev/null || printf "%.0f" "$1"; }
