#!/usr/bin/env bash
# Recipe: a plan upgrade's card charge, made safe with an idempotency key.
#
#   TOLLGATE_URL=http://127.0.0.1:8080 TOLLGATE_ADMIN_KEY=… examples/plan-upgrade.sh
#
# The app's back end asks tollgate before it charges the card:
#   POST /v1/idempotency/{key}/begin {fingerprint, ttl_ms}
#     201 started      → we own the key: charge the card, then finish with the processor's answer
#     200 finished     → the request was already handled: replay the stored answer, charge nothing
#     409 in_progress  → another run of the same request is charging right now: "still processing"
#     422 mismatch     → the key was used for a different request: a bug in the caller
#   POST …/finish {fingerprint, response}   after the charge: stores the answer to replay
#   POST …/abandon {fingerprint}            after a failure that charged nothing: a retry may begin anew
#
# Why not a lock? A lock guards the time window, not the outcome: once the first request has
# charged and released the lock, a retry (the answer was lost, the user clicked again) acquires the
# lock again and charges again. Only an outcome stored under the request's key turns the retry
# into a replay. (The last scenario below shows it.)
#
# And a crash between the charge and `finish`? tollgate cannot know whether the card was charged.
# The key's claim runs out after ttl_ms, the retry begins again and asks the processor again with
# the SAME idempotency key (card processors such as Stripe accept one); the processor answers the
# charge it already made instead of making another. The two keys together give exactly once.
#
# It exits non-zero if the card is not charged exactly once per upgrade. Needs bash, curl, jq.
set -euo pipefail
: "${TOLLGATE_URL:?set TOLLGATE_URL, e.g. http://127.0.0.1:8080}"
: "${TOLLGATE_ADMIN_KEY:?set TOLLGATE_ADMIN_KEY (the admin key of that server)}"
run=${RECIPE_RUN_ID:-$(date +%s)-$$}  # makes the keys of this run unique: the script can run again
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# tg METHOD PATH [JSON] — one call to tollgate; sets STATUS and BODY.
tg() {
  local out
  out=$(curl -sS --max-time 10 -X "$1" "$TOLLGATE_URL$2" -H "Authorization: Bearer $TOLLGATE_ADMIN_KEY" \
    -H 'Content-Type: application/json' ${3:+--data "$3"} -w '\n%{http_code}') ||
    { echo "cannot reach tollgate at $TOLLGATE_URL" >&2; exit 1; }
  STATUS=${out##*$'\n'} BODY=${out%$'\n'*}
}

# --- a fake card processor: charge_card IDEMPOTENCY_KEY AMOUNT → the charge as JSON -----------------
# It counts every call (calls.log) and every charge (charges.log). Like a real processor it takes an
# idempotency key: a call with a key it has seen answers the earlier charge, charging nothing more.
# CARD=declined: a definite refusal that charges nothing. CRASH_AFTER_CHARGE=1: the app dies after
# the processor charged, before it could store the answer.
charge_card() (  # a subshell: the processor's own lock is let go when it answers
  sleep 0.5  # the processor takes its time: a double click arrives while the first call runs
  exec 9>>"$work/processor.lock" && flock 9
  echo "$1" >>"$work/calls.log"
  if [[ ${CARD:-ok} == declined ]]; then echo '{"status":"declined"}'; return; fi
  local id
  id=$(awk -v k="$1" '$1 == k { print $2 }' "$work/charges.log" 2>/dev/null)
  if [[ -z $id ]]; then
    id=ch_$(($(cat "$work/charges.log" 2>/dev/null | wc -l) + 1))
    echo "$1 $id $2" >>"$work/charges.log"
  fi
  jq -nc --arg id "$id" --argjson amount "$2" '{status: "succeeded", charge_id: $id, amount: $amount}'
)
calls() { grep -c "^upgrade-$1\b" "$work/calls.log" 2>/dev/null; }      # calls  REQUEST_ID
charges() { grep -c "^upgrade-$1\b" "$work/charges.log" 2>/dev/null; }  # charges REQUEST_ID

# --- the recipe --------------------------------------------------------------------------------------
# upgrade_plan REQUEST_ID USER PLAN AMOUNT — REQUEST_ID comes from the client (made once per upgrade
# form, sent again by every click and retry of it); the fingerprint is a hash of what is asked.
upgrade_plan() {
  local key="upgrade-$1" fingerprint
  fingerprint=$(printf '%s\n' "$2" "$3" "$4" | sha256sum | cut -c1-64)
  # ttl_ms: longer than a charge can take. A run that crashed holds the key that long, no longer.
  tg POST "/v1/idempotency/$key/begin" "$(jq -nc --arg f "$fingerprint" '{fingerprint: $f, ttl_ms: 2000}')"
  case $STATUS in
    201) ;;  # ours: go on below
    200) echo "replayed: $(jq -c .response <<<"$BODY")"; return 0 ;;
    409) echo "still processing: try again in a moment"; return 3 ;;
    422) echo "refused: key $key was used for another request"; return 4 ;;
    *) echo "tollgate answered $STATUS: $BODY" >&2; return 1 ;;
  esac
  local answer
  answer=$(charge_card "$key" "$4")  # the processor gets the same key: see the header comment
  if [[ -n ${CRASH_AFTER_CHARGE:-} ]]; then echo "crashed after the charge"; exit 9; fi
  if [[ $(jq -r .status <<<"$answer") == declined ]]; then
    # Nothing was charged: give the key back, so that the same request may be tried again.
    tg POST "/v1/idempotency/$key/abandon" "$(jq -nc --arg f "$fingerprint" '{fingerprint: $f}')"
    echo "declined: nothing charged"; return 5
  fi
  tg POST "/v1/idempotency/$key/finish" \
    "$(jq -nc --arg f "$fingerprint" --argjson r "$answer" '{fingerprint: $f, response: $r}')"
  [[ $STATUS == 200 ]] || { echo "finish answered $STATUS: $BODY" >&2; return 1; }
  echo "charged: $answer"
}

# --- the demonstration -------------------------------------------------------------------------------
check() {  # check WHAT EXPECTED ACTUAL
  if [[ $2 != "$3" ]]; then echo "FAILED: $1: expected $2, got $3"; exit 1; fi
  echo "ok: $1 ($3)"
}
set +e  # the recipe's return codes are part of the story

echo "== 1. a double click: two runs of the same upgrade at once"
upgrade_plan "$run-a" alice pro 1200 >"$work/a1" &
upgrade_plan "$run-a" alice pro 1200 >"$work/a2" &
wait
cat "$work/a1" "$work/a2"
# The second is told "still processing" (or, had it come after the first finished, replayed).
check "exactly one of the two clicks charged" 1 "$(cat "$work/a1" "$work/a2" | grep -c '^charged')"
upgrade_plan "$run-a" alice pro 1200
check "a third click replays the stored answer" 0 $?
check "processor calls for alice's upgrade" 1 "$(calls "$run-a")"
check "charges for alice's upgrade" 1 "$(charges "$run-a")"

echo "== 2. a crash after the charge, before finish; then a retry"
(CRASH_AFTER_CHARGE=1 upgrade_plan "$run-b" bob pro 1200)
upgrade_plan "$run-b" bob pro 1200
check "a retry while the crashed run's claim lasts is told to wait" 3 $?
sleep 2.2  # the claim (ttl_ms 2000) runs out
upgrade_plan "$run-b" bob pro 1200
check "the retry after the claim ran out finishes the upgrade" 0 $?
check "processor calls for bob's upgrade (the retry asked again, same key)" 2 "$(calls "$run-b")"
check "charges for bob's upgrade (the processor answered its first one)" 1 "$(charges "$run-b")"
upgrade_plan "$run-b" bob pro 1200 | grep -q '^replayed: .*"charge_id":"ch_2"'
check "later clicks replay bob's one charge" 0 $?

echo "== 3. a declined card charges nothing: the key is given back, a retry may charge"
CARD=declined upgrade_plan "$run-c" carol pro 1200
check "declined" 5 $?
upgrade_plan "$run-c" carol pro 1200
check "the retry with a working card charges" 0 $?
check "charges for carol's upgrade" 1 "$(charges "$run-c")"

echo "== 4. another request under a used key is refused"
upgrade_plan "$run-a" alice team 4900
check "same key, other plan" 4 $?

echo "== for contrast: a lock alone (what not to do)"
# Acquire, charge, release: the lock keeps two runs apart in time, but it remembers nothing. The
# answer of the first run is lost on the way to the browser, which retries: the lock is free
# again, the retry takes it and charges again (no idempotency key to protect the processor).
lock_only_upgrade() {
  tg POST "/v1/locks/upgrade-dave-$run/acquire" "$(jq -nc --arg o "$1" '{owner: $o, ttl_ms: 5000}')"
  [[ $STATUS == 200 ]] || { echo "busy"; return 3; }
  charge_card "lock-only-$1" 1200 >/dev/null  # each attempt is a new call to the processor
  tg POST "/v1/locks/upgrade-dave-$run/release" "$(jq -nc --arg o "$1" '{owner: $o}')"
  echo "charged"
}
lock_only_upgrade attempt-1 && lock_only_upgrade attempt-2
check "with a lock alone, the retry charged the card a second time" 2 "$(grep -c '^lock-only-' "$work/charges.log")"

echo "plan-upgrade: all checks passed"
