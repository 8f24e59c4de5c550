#!/usr/bin/env bash
# Recipe: an assistant's paid streaming answer, one at a time per user, with a stop button.
#
#   TOLLGATE_URL=http://127.0.0.1:8080 TOLLGATE_ADMIN_KEY=… examples/assistant-stream.sh
#
# Each "send" takes a lock named after the user, with an owner unique to this attempt:
#   POST /v1/locks/{key}/acquire {owner, ttl_ms}    200 {fence, …}: stream; 409 lock_held: "busy"
#   POST /v1/locks/{key}/renew {owner, ttl_ms, fence} while streaming (well within ttl_ms)
#     409 lock_cancelled → the user pressed stop: stop streaming (the lock is already free)
#     409 lock_lost      → our lease ran out and someone else may hold it: stop, write nothing more
#   POST /v1/locks/{key}/release {owner, fence}     at the end
#   POST /v1/locks/{key}/cancel                     the stop button
# The lease makes a crashed stream free the user after ttl_ms. A stream that was merely paused
# (a GC pause, a stalled network) may still believe it holds the lock after its lease ran out, so
# every write downstream carries the fence: it grows each time the lock changes hands, and a
# downstream that remembers the highest fence it saw refuses the late writer.
#
# It exits non-zero if a second send is not refused, if stop does not stop, or if a stale fence is
# accepted. Needs bash, curl, jq.
set -euo pipefail
: "${TOLLGATE_URL:?set TOLLGATE_URL, e.g. http://127.0.0.1:8080}"
: "${TOLLGATE_ADMIN_KEY:?set TOLLGATE_ADMIN_KEY (the admin key of that server)}"
run=${RECIPE_RUN_ID:-$(date +%s)-$$}  # makes the users of this run unique: the script can run again
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

# --- a fake downstream (the conversation store): write_chunk KEY FENCE TEXT -------------------------
# Remembers the highest fence seen per key and refuses a lower one.
write_chunk() (
  exec 9>>"$work/downstream.lock" && flock 9
  local highest
  highest=$(cat "$work/fence-$1" 2>/dev/null || echo 0)
  if (($2 < highest)); then echo "downstream refused fence $2 (it saw $highest)" >&2; exit 1; fi
  echo "$2" >"$work/fence-$1"
  echo "$3" >>"$work/transcript-$1"
)
chunks() { cat "$work/transcript-$1" 2>/dev/null | wc -l; }

# --- the recipe --------------------------------------------------------------------------------------
# send_message USER CHUNKS — stream an answer of CHUNKS chunks. Returns 0 done, 3 busy, 4 stopped
# by the user, 6 lock lost.
send_message() {
  local key="assistant:$1" owner="$1:$(date +%s%N):$BASHPID" fence i
  tg POST "/v1/locks/$key/acquire" "$(jq -nc --arg o "$owner" '{owner: $o, ttl_ms: 3000}')"
  if [[ $STATUS == 409 ]]; then
    echo "busy: an answer is still streaming for $1 (lease until $(jq -r .expires_at <<<"$BODY"))"; return 3
  fi
  [[ $STATUS == 200 ]] || { echo "acquire answered $STATUS: $BODY" >&2; return 1; }
  fence=$(jq .fence <<<"$BODY")
  for ((i = 1; i <= $2; i++)); do
    sleep 0.2  # the model produces the next chunk (the paid part)
    # Renew before each write: it keeps the lease and is how the stop button reaches us. (Every
    # chunk here; a real stream renews about every ttl_ms/3 or each second, whichever is sooner.)
    tg POST "/v1/locks/$key/renew" "$(jq -nc --arg o "$owner" --argjson f "$fence" '{owner: $o, ttl_ms: 3000, fence: $f}')"
    case $STATUS:$(jq -r '.code // empty' <<<"$BODY") in
      200:) ;;
      409:lock_cancelled) echo "stopped by the user after $((i - 1)) chunks"; return 4 ;;
      409:lock_lost) echo "lock lost after $((i - 1)) chunks: stopping"; return 6 ;;
      *) echo "renew answered $STATUS: $BODY" >&2; return 1 ;;
    esac
    write_chunk "$key" "$fence" "chunk $i" || return 6
  done
  tg POST "/v1/locks/$key/release" "$(jq -nc --arg o "$owner" --argjson f "$fence" '{owner: $o, fence: $f}')"
  echo "done: $2 chunks under fence $fence"
}

# --- the demonstration -------------------------------------------------------------------------------
check() {  # check WHAT EXPECTED ACTUAL
  if [[ $2 != "$3" ]]; then echo "FAILED: $1: expected $2, got $3"; exit 1; fi
  echo "ok: $1 ($3)"
}
wait_for_chunks() {  # wait_for_chunks KEY N — at most 5 s
  for _ in $(seq 50); do (($(chunks "$1") >= $2)) && return; sleep 0.1; done
  echo "FAILED: no $2 chunks for $1 within 5 s"; exit 1
}
set +e  # the recipe's return codes are part of the story

echo "== 1. a second send while the first answer streams is refused"
bob=bob.$run
send_message "$bob" 10 >"$work/bob" &
wait_for_chunks "assistant:$bob" 1
send_message "$bob" 10
check "the second send" 3 $?
wait $!
check "the first answer streams to its end" 0 $?
cat "$work/bob"
check "chunks in bob's transcript" 10 "$(chunks "assistant:$bob")"

echo "== 2. the stop button"
carol=carol.$run
send_message "$carol" 20 >"$work/carol" &
wait_for_chunks "assistant:$carol" 2
tg POST "/v1/locks/assistant:$carol/cancel"
check "cancel" 200 "$STATUS"
wait $!
check "the stream stopped" 4 $?
cat "$work/carol"
written=$(chunks "assistant:$carol")
check "it stopped early: $written of 20 chunks written, fewer than 20" 1 "$((written < 20))"
tg GET "/v1/locks/assistant:$carol"
check "the lock is free after stop" false "$(jq .held <<<"$BODY")"
send_message "$carol" 2
check "carol can send again" 0 $?

echo "== 3. a paused stream whose lease ran out cannot write any more"
dave=dave.$run
tg POST "/v1/locks/assistant:$dave/acquire" '{"owner":"paused-stream","ttl_ms":300}'
old_fence=$(jq .fence <<<"$BODY")
write_chunk "assistant:$dave" "$old_fence" "chunk 1 (before the pause)"
sleep 0.5  # paused past its lease: a new send takes the lock, with a higher fence
send_message "$dave" 2
check "the new send, after the lease ran out" 0 $?
write_chunk "assistant:$dave" "$old_fence" "chunk 2 (after the pause)"
check "the downstream refuses the paused stream's fence" 1 $?
tg POST "/v1/locks/assistant:$dave/renew" "$(jq -nc --argjson f "$old_fence" '{owner: "paused-stream", ttl_ms: 300, fence: $f}')"
check "and its renew answers" lock_lost "$(jq -r .code <<<"$BODY")"

echo "assistant-stream: all checks passed"
