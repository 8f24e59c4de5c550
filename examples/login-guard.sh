#!/usr/bin/env bash
# Recipe: login protection with two rate limits, one per account and one per client address.
#
#   TOLLGATE_URL=http://127.0.0.1:8080 TOLLGATE_ADMIN_KEY=… examples/login-guard.sh
#
# Each login attempt is counted twice, before the password is even looked at:
#   POST /v1/ratelimits/login_ip/check {key: <client address>}   one address guessing many accounts
#   POST /v1/ratelimits/login_account/check {key: <account>}     many addresses guessing one account
#     200 {allowed: true, remaining, …} → go on and check the password
#     429 rate_limited, Retry-After: N  → refuse without checking the password; the client waits N s
#   POST /v1/ratelimits/login_account/reset {key: <account>}     after a good login: the owner typed
#                                                               it right, forget the earlier misses
# The address key is never reset by a good login: an attacker who owns one account would reset the
# budget of the address it attacks from. Both policies are `shared` (kept in the database), so an
# attacker gains nothing by spreading attempts over instances. GCRA: `limit` attempts at once, then
# one more every period_ms/limit.
#
# The server needs the two policies (short periods here, so the demonstration takes seconds; in
# production e.g. login_account 5 per 900000 ms, login_ip 50 per 900000 ms):
#   [ratelimits.login_account]
#   limit = 5
#   period_ms = 15000
#   store = "shared"
#   [ratelimits.login_ip]
#   limit = 10
#   period_ms = 10000
#   store = "shared"
#
# It exits non-zero if an attempt beyond a budget is let through, if Retry-After is not enough to
# be let in again, or if a good login does not reset the account. Needs bash, curl, jq.
set -euo pipefail
: "${TOLLGATE_URL:?set TOLLGATE_URL, e.g. http://127.0.0.1:8080}"
: "${TOLLGATE_ADMIN_KEY:?set TOLLGATE_ADMIN_KEY (the admin key of that server)}"
run=${RECIPE_RUN_ID:-$(date +%s)-$$}  # makes the keys of this run unique: the script can run again
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# tg METHOD PATH [JSON] — one call to tollgate; sets STATUS, BODY and RETRY_AFTER (the header, or "").
tg() {
  local out
  out=$(curl -sS --max-time 10 -X "$1" "$TOLLGATE_URL$2" -H "Authorization: Bearer $TOLLGATE_ADMIN_KEY" \
    -H 'Content-Type: application/json' ${3:+--data "$3"} -D "$work/headers" -w '\n%{http_code}') ||
    { echo "cannot reach tollgate at $TOLLGATE_URL" >&2; exit 1; }
  STATUS=${out##*$'\n'} BODY=${out%$'\n'*}
  RETRY_AFTER=$(awk -F': *' 'tolower($1) == "retry-after" { print $2 + 0 }' "$work/headers")
}

# The app's own user store (a stand-in): account → password.
declare -A PASSWORDS=(["alice.$run"]="correct horse" ["mallory.$run"]="mallory's own")

# --- the recipe --------------------------------------------------------------------------------------
# login ACCOUNT PASSWORD CLIENT_ADDRESS — returns 0 welcome, 1 wrong password, 2 too many attempts
# (RETRY_AFTER: the seconds the client must wait, sent to it as Retry-After).
login() {
  local policy key
  for policy in login_ip login_account; do  # the address first: a refused address costs no account budget
    [[ $policy == login_ip ]] && key=$3 || key=$1
    tg POST "/v1/ratelimits/$policy/check" "$(jq -nc --arg k "$key" '{key: $k}')"
    if [[ $STATUS == 429 ]]; then
      echo "429 too many attempts ($policy): retry after $RETRY_AFTER s"; return 2
    fi
    [[ $STATUS == 200 ]] || { echo "check answered $STATUS: $BODY" >&2; exit 1; }
  done
  local left
  left=$(jq .remaining <<<"$BODY")  # the account's budget
  if [[ ${PASSWORDS[$1]:-} != "$2" || -z $2 ]]; then
    echo "401 wrong password for $1 ($left attempts left)"; return 1
  fi
  tg POST /v1/ratelimits/login_account/reset "$(jq -nc --arg k "$1" '{key: $k}')"
  echo "200 welcome, $1"
}

# --- the demonstration -------------------------------------------------------------------------------
check() {  # check WHAT EXPECTED ACTUAL
  if [[ $2 != "$3" ]]; then echo "FAILED: $1: expected $2, got $3"; exit 1; fi
  echo "ok: $1 ($3)"
}
set +e  # the recipe's return codes are part of the story

echo "== 1. one account guessed at: its budget runs out, Retry-After is honoured, a good login resets it"
alice=alice.$run
for i in 1 2 3 4 5; do
  login "$alice" "guess-$i" 203.0.113.7
  check "wrong password $i is checked" 1 $?
done
login "$alice" "correct horse" 203.0.113.7
check "attempt 6, even with the right password, is refused" 2 $?
((RETRY_AFTER >= 1)) || { echo "FAILED: no Retry-After header on the 429"; exit 1; }
login "$alice" "correct horse" 198.51.100.20
check "from another address too: the budget is the account's" 2 $?
echo "the client waits the $RETRY_AFTER s of Retry-After"
sleep "$RETRY_AFTER"
login "$alice" "correct horse" 203.0.113.7
check "after Retry-After the right password gets in" 0 $?
out=$(login "$alice" "typo" 203.0.113.7)
echo "$out"
check "the good login reset the account: a full budget again" "401 wrong password for $alice (4 attempts left)" "$out"

echo "== 2. one address trying many accounts (credential stuffing): the address budget runs out"
# 10 at once, then one a second: over E seconds at most 10 + E attempts are let through.
allowed=0 refused=0 start=$(date +%s%N)
for i in $(seq 20); do
  login "victim-$i.$run" "password1" 192.0.2.66 >"$work/out"
  case $? in
    1) allowed=$((allowed + 1)) ;;
    2) refused=$((refused + 1)); ((refused == 1)) && cat "$work/out"
       grep -q '(login_ip)' "$work/out" || { cat "$work/out"; echo "FAILED: not the address policy"; exit 1; } ;;
  esac
done
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
echo "192.0.2.66: $allowed of 20 attempts let through in $elapsed_ms ms, $refused refused by login_ip"
check "at least the burst of 10 was let through" 1 "$((allowed >= 10))"
check "no more than 10 + one a second ($((10 + elapsed_ms / 1000 + 1)))" 1 "$((allowed <= 10 + elapsed_ms / 1000 + 1))"
check "every other attempt was refused" 20 "$((allowed + refused))"

echo "login-guard: all checks passed"
