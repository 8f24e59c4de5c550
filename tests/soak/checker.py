#!/usr/bin/env python3
"""The soak's history checker, in the spirit of Jepsen's bank test.

    python3 tests/soak/checker.py HISTORY.jsonl STATE.json

HISTORY.jsonl: one operation a line, as tests/soak/history.py writes them (kind, args, outcome
ok/refused/unknown, the ok answer's body, attempts with times). STATE.json: what the servers hold
after the run, read once every instance was healthy again and every hold's TTL had passed (accounts,
each account's whole event log and holds, every job the history names, every lock key, the audit).

The final state must be explained by every ok operation plus some subset of the unknown ones, and
nothing else: each check below names what it found wrong as an *anomaly*. Prints what it checked, a
table (operations by kind and outcome, faults by kind, anomalies), and as its last line one JSON
object; exits 1 on any anomaly.

Pure: `check(history, state)` reads nothing else, so tests/soak/checker_selftest.py can feed it
doctored histories and states.
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

ANOMALY_LINES_MAX = 50  # printed; all are counted
# Balance notices (docs/api.md "Balance notices"): amount 0, no hold, the balances after the movement before it.
NOTICES = ("balance_low", "balance_depleted", "balance_recovered")


@dataclass
class Report:
    anomalies: list[str] = field(default_factory=list)
    checked: Counter[str] = field(default_factory=Counter)  # what was checked, how many times
    notes: list[str] = field(default_factory=list)

    def bad(self, what: str) -> None:
        self.anomalies.append(what)


# --- the fold of one account's events (the same rules as src/core/invariants.cc, written again) -----
def fold_events(account_id: str, events: list[dict[str, Any]], r: Report) -> dict[str, int]:
    # Credits move to expired when a lot expires (lot_expired), or when a hold or refund gives back
    # to a lot that has expired (the event's expired_after says how many, at most all of them).
    b = {"available": 0, "reserved": 0, "used": 0, "expired": 0, "purchased": 0, "active_holds": 0}
    holds: dict[str, dict[str, Any]] = {}
    last_id = 0
    for e in events:
        where = f"{account_id}: event {e.get('event_id')} ({e.get('type')})"
        if e["event_id"] <= last_id:
            r.bad(f"{where}: event_id does not increase")
        last_id = e["event_id"]
        if e.get("account_id") != account_id:
            r.bad(f"{where}: in the log of another account ({e.get('account_id')})")
        t, amount, hid = e["type"], e["amount"], e.get("hold_id")
        if amount < 0:
            r.bad(f"{where}: negative amount")
        life = None

        def give_back(n: int) -> None:
            to_expired = e["expired_after"] - b["expired"]
            if to_expired < 0 or to_expired > n:
                r.bad(f"{where}: gives back {n} credits but moves {to_expired} to expired")
                return
            b["expired"] += to_expired
            b["available"] += n - to_expired

        if t not in ("credited", "debited", "account_updated", "lot_expired") + NOTICES:
            if not hid:
                r.bad(f"{where}: a hold event without hold_id")
                continue
            if t == "reserved":
                if hid in holds:
                    r.bad(f"{where}: hold {hid} reserved twice")
                life = holds.setdefault(hid, {"amount": amount, "ended": False, "expired": False, "late": False})
            else:
                life = holds.get(hid)
                if life is None:
                    r.bad(f"{where}: hold {hid} has no reserved event before it")
                    continue
        if t == "credited":
            b["available"] += amount
            b["purchased"] += amount
        elif t == "debited":
            b["available"] -= amount
            b["purchased"] -= amount
        elif t == "reserved":
            b["available"] -= amount
            b["reserved"] += amount
            b["active_holds"] += 1
        elif t in ("committed", "released", "expired"):
            assert life is not None
            if life["ended"]:
                r.bad(f"{where}: hold {hid} ended twice")
                continue
            used = amount if t == "committed" else 0
            if t == "committed" and amount > life["amount"]:
                r.bad(f"{where}: commits more than was held")
            if t != "committed" and amount != life["amount"]:
                r.bad(f"{where}: amount differs from the hold's")
            b["reserved"] -= life["amount"]
            b["used"] += used
            give_back(life["amount"] - used)
            life["ended"], life["expired"] = True, t == "expired"
            b["active_holds"] -= 1
        elif t in ("late_charged", "late_forgiven"):
            assert life is not None
            if not life["expired"] or life["late"]:
                r.bad(f"{where}: late settlement of hold {hid}, which is not a once-expired hold")
                continue
            if amount > life["amount"]:
                r.bad(f"{where}: late settlement of more than was held")
            if t == "late_charged":
                b["available"] -= amount
                b["used"] += amount
            life["late"] = True
        elif t == "extended":
            assert life is not None
            if life["ended"]:
                r.bad(f"{where}: hold {hid} extended after it ended")
        elif t == "lot_expired":
            if amount < 1 or hid or not e.get("lot_id"):
                r.bad(f"{where}: a lot_expired event names no lot, moves nothing, or names a hold")
            b["available"] -= amount
            b["expired"] += amount
        elif t in NOTICES:
            if amount != 0 or hid:
                r.bad(f"{where}: a balance notice moves an amount or names a hold")
        elif t != "account_updated":
            r.bad(f"{where}: unknown event type")
        after = (e["available_after"], e["reserved_after"], e["used_after"], e["expired_after"])
        if after != (b["available"], b["reserved"], b["used"], b["expired"]):
            r.bad(f"{where}: balances after it ({'/'.join(map(str, after))}) "
                  f"differ from the fold ({b['available']}/{b['reserved']}/{b['used']}/{b['expired']})")
        r.checked["events folded"] += 1
    return b


def check_accounts(state: dict[str, Any], r: Report) -> None:
    for acct, row in state["accounts"].items():
        events = state["events"].get(acct, [])
        f = fold_events(acct, events, r)
        if row["available"] + row["reserved"] + row["used"] + row["expired"] != row["purchased"]:
            r.bad(f"{acct}: available + reserved + used + expired != purchased ({row})")
        for k in ("available", "reserved", "used", "expired", "purchased", "active_holds"):
            if row[k] != f[k]:
                r.bad(f"{acct}: the row's {k} {row[k]} != the fold of its {len(events)} events ({f[k]})")
        if row["available"] < -row.get("overdraft_limit", 0):
            r.bad(f"{acct}: available {row['available']} below -overdraft_limit")
        if row["active_holds"] != 0 or row["reserved"] != 0:
            r.bad(f"{acct}: {row['active_holds']} holds still active ({row['reserved']} reserved) after every TTL "
                  "passed and every instance was healthy (the reaper did not end them)")
        r.checked["accounts: row == fold of its events, a+r+u+e == purchased, nothing left reserved"] += 1
    audit = state.get("audit") or {}
    if audit.get("violations") != []:
        r.bad(f"GET /v1/audit: {audit}")
    elif audit.get("accounts_checked", 0) < len(state["accounts"]):
        r.bad(f"GET /v1/audit checked {audit.get('accounts_checked')} accounts of {len(state['accounts'])}")
    r.checked["GET /v1/audit clean"] += 1


def ops_of(history: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in history if o["kind"] == kind]


def check_transfers(history: list[dict[str, Any]], state: dict[str, Any], r: Report) -> None:
    """Each credit and debit is in the log once if ok, at most once if unknown, never if refused."""
    by_ref: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for acct, events in state["events"].items():
        for e in events:
            if e["type"] in ("credited", "debited"):
                by_ref[e.get("reference", "")].append(e)
    asked: set[str] = set()
    totals: Counter[str] = Counter()
    for kind, etype in (("credit", "credited"), ("debit", "debited")):
        for o in ops_of(history, kind):
            a = o["args"]
            asked.add(a["reference"])
            found = by_ref.get(a["reference"], [])
            right = [e for e in found if e["type"] == etype and e["amount"] == a["amount"]
                     and e["account_id"] == a["account_id"]]
            if len(found) != len(right):
                r.bad(f"{kind} {a['reference']}: the log has {found}, not a {etype} of {a['amount']} to {a['account_id']}")
            n = len(found)
            if o["outcome"] == "ok" and n != 1:
                r.bad(f"acknowledged {kind} {a['reference']} ({a['amount']} to {a['account_id']}) is in the log {n} times")
            elif o["outcome"] == "unknown" and n > 1:
                r.bad(f"unknown {kind} {a['reference']} applied {n} times")
            elif o["outcome"] == "refused" and n != 0:
                r.bad(f"refused {kind} {a['reference']} ({o['code']}) is in the log {n} times")
            if n >= 1:
                totals[kind] += a["amount"]
            r.checked[f"{kind}s: in the log once if ok, at most once if unknown, never if refused"] += 1
    for ref, events in by_ref.items():
        if ref not in asked:
            r.bad(f"{events[0]['type']} event {events[0]['event_id']} with reference {ref!r} that no client asked for")
    purchased = sum(row["purchased"] for row in state["accounts"].values())
    expected = totals["credit"] - totals["debit"]
    if purchased != expected:
        r.bad(f"total purchased {purchased} != credits − debits that took effect ({totals['credit']} − {totals['debit']})")
    r.checked["bank total: Σ purchased == Σ credits − Σ debits of ok and present unknown operations"] += 1
    r.notes.append(f"bank: purchased {purchased} = credited {totals['credit']} − debited {totals['debit']}")


def index_holds(state: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], dict[str, list[dict[str, Any]]],
                                                 dict[str, list[dict[str, Any]]]]:
    holds: dict[str, dict[str, Any]] = {}
    by_request: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for acct, hs in state["holds"].items():
        for h in hs:
            holds[h["hold_id"]] = h
            by_request[h["request_id"]].append(h)
    events_of: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for acct, events in state["events"].items():
        for e in events:
            if e.get("hold_id"):
                events_of[e["hold_id"]].append(e)
    return holds, by_request, events_of


def terminal(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    ends = [e for e in events if e["type"] in ("committed", "released", "expired")]
    return ends[0] if ends else None


def check_holds(history: list[dict[str, Any]], state: dict[str, Any], r: Report) -> None:
    holds, by_request, events_of = index_holds(state)
    asked: set[str] = set()
    for o in ops_of(history, "reserve"):
        a = o["args"]
        asked.add(a["request_id"])
        found = by_request.get(a["request_id"], [])
        n = len(found)
        if o["outcome"] == "ok":
            if n != 1:
                r.bad(f"acknowledged reserve {a['request_id']} has {n} holds")
            elif o["result"] and found[0]["hold_id"] != o["result"]["hold_id"]:
                r.bad(f"reserve {a['request_id']} answered hold {o['result']['hold_id']}, the store has {found[0]['hold_id']}")
        elif o["outcome"] == "unknown" and n > 1:
            r.bad(f"unknown reserve {a['request_id']} made {n} holds")
        elif o["outcome"] == "refused" and n != 0:
            r.bad(f"refused reserve {a['request_id']} ({o['code']}) made {n} holds")
        for h in found:
            if h["amount"] != a["amount"] or h["account_id"] != a["account_id"]:
                r.bad(f"hold {h['hold_id']} of reserve {a['request_id']}: {h['amount']} on {h['account_id']}, "
                      f"asked {a['amount']} on {a['account_id']}")
            reserved = [e for e in events_of.get(h["hold_id"], []) if e["type"] == "reserved"]
            if len(reserved) != 1 or reserved[0]["amount"] != a["amount"]:
                r.bad(f"hold {h['hold_id']} has reserved events {reserved}, expected one of {a['amount']}")
        r.checked["reserves: one hold if ok, at most one if unknown, none if refused"] += 1
    for rid, hs in by_request.items():
        if rid not in asked and not rid.startswith("job:"):
            r.bad(f"hold {hs[0]['hold_id']} with request_id {rid!r} that no client asked for")
    for hid, h in holds.items():
        if h["status"] == "active":
            r.bad(f"hold {hid} is still active (expires_at {h['expires_at']}) after every TTL passed")
        if hid not in events_of:
            r.bad(f"hold {hid} has no events")
        end = terminal(events_of.get(hid, []))
        # Times are RFC 3339 UTC with milliseconds, one format: their text orders as their time.
        if end and end["type"] == "expired" and "at" in end and end["at"] < h["expires_at"]:
            r.bad(f"hold {hid} expired at {end['at']}, before its expires_at {h['expires_at']}")
    for hid in events_of:
        if hid not in holds:
            r.bad(f"events name hold {hid}, which no hold list has")
    r.checked["holds: none active past its TTL, none expired before it, every hold has events and every hold "
              "event a hold"] += len(holds)

    # Commits, releases and extends, per hold.
    on_hold: dict[str, dict[str, list[dict[str, Any]]]] = {k: defaultdict(list) for k in ("commit", "release", "extend")}
    for o in history:
        if o["kind"] in on_hold:
            on_hold[o["kind"]][o["args"]["hold_id"]].append(o)
    commits, releases, extends = on_hold["commit"], on_hold["release"], on_hold["extend"]
    for hid, h in holds.items():
        if h["request_id"].startswith("job:"):
            continue
        evs = events_of.get(hid, [])
        end = terminal(evs)
        late = [e for e in evs if e["type"] in ("late_charged", "late_forgiven")]
        may_commit = [o for o in commits.get(hid, []) if o["outcome"] != "refused"]
        asked_amounts = {o["args"].get("amount", h["amount"]) for o in may_commit}
        if end and end["type"] == "committed" and end["amount"] not in asked_amounts:
            r.bad(f"hold {hid} committed {end['amount']}, no commit asked that (asked: {sorted(asked_amounts)})")
        for e in late:
            if e["type"] == "late_charged" and e["amount"] not in asked_amounts:
                r.bad(f"hold {hid} late-charged {e['amount']}, no commit asked that (asked: {sorted(asked_amounts)})")
        if end and end["type"] == "released" and not [o for o in releases.get(hid, []) if o["outcome"] != "refused"]:
            r.bad(f"hold {hid} released, no client asked for it")
        for o in commits.get(hid, []):
            want = o["args"].get("amount", h["amount"])
            if o["outcome"] != "ok" or not o["result"]:
                continue
            said = o["result"].get("status")
            if said == "committed":
                if not end or end["type"] != "committed" or end["amount"] != want or o["result"]["committed_amount"] != want:
                    r.bad(f"acknowledged commit of {want} on hold {hid} (answered committed "
                          f"{o['result'].get('committed_amount')}): the log ends it with {end}")
            elif said == "expired":
                outcome = o["result"].get("late_outcome")
                kinds = [e["type"] for e in late]
                if not end or end["type"] != "expired" or kinds != [f"late_{outcome}"]:
                    r.bad(f"acknowledged late commit on hold {hid} (late_outcome {outcome}): the log has {end}, {kinds}")
                elif outcome == "charged" and late[0]["amount"] != want:
                    r.bad(f"acknowledged late charge of {want} on hold {hid}: the log charged {late[0]['amount']}")
            else:
                r.bad(f"commit on hold {hid} answered 2xx with status {said}")
            r.checked["acknowledged commits (full and partial) in the log exactly as answered"] += 1
        for o in releases.get(hid, []):
            if o["outcome"] != "ok" or not o["result"]:
                continue
            said = o["result"].get("status")
            if said not in ("released", "expired") or not end or end["type"] != said:
                r.bad(f"acknowledged release of hold {hid} (answered {said}): the log ends it with {end}")
            r.checked["acknowledged releases in the log as answered"] += 1
        ext = [o for o in extends.get(hid, [])]
        n_ext = sum(1 for e in evs if e["type"] == "extended")
        ok_ext = sum(1 for o in ext if o["outcome"] == "ok")
        may_ext = sum(len(o["attempts"]) for o in ext if o["outcome"] != "refused")
        if not ok_ext <= n_ext <= may_ext:
            r.bad(f"hold {hid}: {n_ext} extended events for {ok_ext} acknowledged extends of {may_ext} attempts")
        r.checked["holds: every end and late charge asked for, extends between ok and attempted"] += 1


def check_jobs(history: list[dict[str, Any]], state: dict[str, Any], r: Report) -> None:
    holds, by_request, events_of = index_holds(state)
    jobs = state.get("jobs", {})
    for o in ops_of(history, "job_submit"):
        a = o["args"]
        jid = a["client_request_id"]
        job = jobs.get(jid)
        jholds = by_request.get(f"job:{jid}", [])
        if o["outcome"] == "ok" and job is None:
            r.bad(f"acknowledged job {jid} does not exist")
        if o["outcome"] == "refused" and (job is not None or jholds):
            r.bad(f"refused job {jid} ({o['code']}) exists")
        r.checked["jobs: exist if acknowledged, not if refused"] += 1
        if job is None:
            if jholds:
                r.bad(f"job {jid} does not exist but its hold {jholds[0]['hold_id']} does")
            continue
        if job["account_id"] != a["account_id"] or job["cost"] != a["cost"]:
            r.bad(f"job {jid}: {job['cost']} on {job['account_id']}, asked {a['cost']} on {a['account_id']}")
        if job["status"] not in ("completed", "failed", "cancelled"):
            r.bad(f"job {jid} left unended ({job['status']}, {job['attempts']} attempts)")
            continue
        if len(jholds) != 1 or jholds[0]["hold_id"] != job["hold_id"]:
            r.bad(f"job {jid} has holds {[h['hold_id'] for h in jholds]}, the job names {job['hold_id']}")
            continue
        evs = events_of.get(job["hold_id"], [])
        end = terminal(evs)
        late = [e["type"] for e in evs if e["type"] in ("late_charged", "late_forgiven")]
        if job["status"] == "completed":
            charged = [e["amount"] for e in evs if e["type"] in ("committed", "late_charged")]
            fine = end is not None and (end["type"] == "committed" or (end["type"] == "expired" and len(late) == 1))
            if fine and charged and charged != [job["cost"]]:
                r.bad(f"job {jid} of cost {job['cost']} completed and charged {charged}")
        else:
            fine = end is not None and end["type"] in ("released", "expired") and not late
        if not fine:
            r.bad(f"job {jid} {job['status']} but its hold {job['hold_id']} ended with {end} {late}")
        r.checked["jobs: ended, and completed ⇔ hold charged, failed/cancelled ⇔ hold returned"] += 1
    for o in ops_of(history, "job_cancel"):
        jid = o["args"]["client_request_id"]
        job = jobs.get(jid)
        if o["outcome"] == "ok" and o["result"] and job is not None and o["result"].get("status") in (
                "completed", "failed", "cancelled") and job["status"] != o["result"]["status"]:
            r.bad(f"cancel of job {jid} answered {o['result']['status']}, the job ended {job['status']}")
        r.checked["job cancels: the answered end is the job's end"] += 1


def check_locks(history: list[dict[str, Any]], state: dict[str, Any], r: Report) -> None:
    """Fences: one owner per fence; across acknowledged acquisitions in real-time order a fence never
    goes back, and strictly grows when the owner changes; a renew or release of a fence older than an
    acquisition by another owner that had completed is not acknowledged."""
    per_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for o in history:
        if o["kind"].startswith("lock_") and o["outcome"] == "ok":
            per_key[o["args"]["key"]].append(o)
    for key, ops in per_key.items():
        owner_of: dict[int, str] = {}
        for o in ops:
            fence = o["result"]["fence"] if o["kind"] != "lock_release" else o["args"]["fence"]
            if o["kind"] == "lock_renew" and o["result"]["fence"] != o["args"]["fence"]:
                r.bad(f"lock {key}: renew with fence {o['args']['fence']} answered fence {o['result']['fence']}")
            prev = owner_of.setdefault(fence, o["args"]["owner"])
            if prev != o["args"]["owner"]:
                r.bad(f"lock {key}: fence {fence} held by {prev} and by {o['args']['owner']}")
        acquired = sorted((o for o in ops if o["kind"] == "lock_acquire"), key=lambda o: o["t_complete"])
        max_by_owner: dict[str, int] = {}
        i = 0
        for o in sorted(ops, key=lambda o: o["t_invoke"]):
            while i < len(acquired) and acquired[i]["t_complete"] < o["t_invoke"]:
                a = acquired[i]
                max_by_owner[a["args"]["owner"]] = max(max_by_owner.get(a["args"]["owner"], 0), a["result"]["fence"])
                i += 1
            me = o["args"]["owner"]
            fence = o["result"]["fence"] if o["kind"] != "lock_release" else o["args"]["fence"]
            others = max((f for w, f in max_by_owner.items() if w != me), default=0)
            if o["kind"] == "lock_acquire":
                if fence <= others or fence < max_by_owner.get(me, 0):
                    r.bad(f"lock {key}: {me} acquired fence {fence} after fences up to {others} of others "
                          f"and {max_by_owner.get(me, 0)} of its own were acknowledged")
            elif fence < others:
                r.bad(f"lock {key}: {o['kind']} by {me} with fence {fence} acknowledged after another owner "
                      f"acquired fence {others}")
            r.checked["locks: fences monotonic across acknowledged acquisitions, none shared, no stale renew"] += 1
        final = (state.get("locks") or {}).get(key)
        top = max(a["result"]["fence"] for a in acquired) if acquired else 0
        if final is not None and final["fence"] < top:
            r.bad(f"lock {key}: the store's fence {final['fence']} is below an acknowledged {top}")
        if final is None and top:
            r.bad(f"lock {key}: acknowledged (fence {top}) but the store has no such lock")


def check_ratelimits(history: list[dict[str, Any]], state: dict[str, Any], r: Report) -> None:
    """A shared GCRA policy admits at most limit + L/emission in any span L (the decisions of the
    admitted checks lie within their [invoke, complete] intervals)."""
    cfg = state.get("config", {}).get("ratelimit")
    if not cfg:
        return
    limit, period = cfg["limit"], cfg["period_ms"] / 1000.0
    emission = period / limit
    per_key: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for o in ops_of(history, "ratelimit"):
        if o["outcome"] == "ok" and o["result"] and o["result"].get("allowed") is True:
            per_key[o["args"]["key"]].append((o["t_invoke"], o["t_complete"]))
    for key, spans in per_key.items():
        spans.sort()
        worst = ""
        for i, (start, _) in enumerate(spans):
            inside: list[float] = []
            for inv, comp in spans[i:]:
                if inv - start > 10 * period:
                    break
                inside.append(comp)
            inside.sort()
            for n, end in enumerate(inside, start=1):
                bound = limit + int((end - start) / emission) + 1
                if n > bound and not worst:
                    worst = f"{n} admitted within {end - start:.3f} s (at most {bound})"
        if worst:
            r.bad(f"rate limit soak/{key}: {worst}")
        r.checked["rate limits: admitted ≤ limit + span/emission in every span"] += len(spans)


def check(history: list[dict[str, Any]], state: dict[str, Any]) -> Report:
    r = Report()
    check_accounts(state, r)
    check_transfers(history, state, r)
    check_holds(history, state, r)
    check_jobs(history, state, r)
    check_locks(history, state, r)
    check_ratelimits(history, state, r)
    for exit_note in state.get("unexpected_exits", []):
        if "signal" in exit_note:
            r.bad(f"an instance crashed: {exit_note}")
        else:
            r.notes.append(exit_note)
    if not state.get("settled", True):
        r.notes.append("the end state was read before every job and hold had ended (see anomalies)")
    return r


def table(rows: list[list[Any]], header: list[str]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths))  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def summarize(history: list[dict[str, Any]], state: dict[str, Any], report: Report) -> tuple[str, dict[str, Any]]:
    """The printed report and the summary object (the last line's JSON)."""
    out: list[str] = [f"== checker: {state.get('backend', '?')} (seed {state.get('seed')})", "checked:"]
    for what, n in report.checked.items():
        out.append(f"  {n:>7}  {what}")
    for note in report.notes:
        out.append(f"  note: {note}")
    by_kind: dict[str, Counter[str]] = defaultdict(Counter)
    for o in history:
        by_kind[o["kind"]][o["outcome"]] += 1
    retried: Counter[str] = Counter()  # operations that needed more than one attempt (the same id again)
    for o in history:
        if len(o["attempts"]) > 1:
            retried[o["kind"]] += 1
    rows = [[k, c["ok"], c["refused"], c["unknown"], sum(c.values()), retried[k]] for k, c in sorted(by_kind.items())]
    total: Counter[str] = Counter()
    for c in by_kind.values():
        total.update(c)
    rows.append(["all", total["ok"], total["refused"], total["unknown"], sum(total.values()), sum(retried.values())])
    out.append("operations by kind and outcome (retried: more than one attempt, the same id each time):")
    out.append(table(rows, ["kind", "ok", "refused", "unknown", "total", "retried"]))
    faults = Counter(state.get("faults", {}))
    out.append("faults injected by kind:")
    out.append(table([[k, n] for k, n in sorted(faults.items())] + [["all", sum(faults.values())]], ["fault", "count"]))
    out.append(f"anomalies: {len(report.anomalies)}")
    for a in report.anomalies[:ANOMALY_LINES_MAX]:
        out.append(f"  ANOMALY {a}")
    if len(report.anomalies) > ANOMALY_LINES_MAX:
        out.append(f"  … and {len(report.anomalies) - ANOMALY_LINES_MAX} more")
    summary = {"backend": state.get("backend"), "seed": state.get("seed"), "operations": sum(total.values()),
               "ok": total["ok"], "refused": total["refused"], "unknown": total["unknown"],
               "retried": sum(retried.values()),
               "faults": sum(faults.values()), "faults_by_kind": dict(sorted(faults.items())),
               "anomalies": len(report.anomalies)}
    return "\n".join(out), summary


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: checker.py HISTORY.jsonl STATE.json", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        history = [json.loads(line) for line in f if line.strip()]
    with open(argv[2], encoding="utf-8") as f:
        state = json.load(f)
    report = check(history, state)
    text, summary = summarize(history, state, report)
    print(text)
    print(json.dumps(summary, sort_keys=True))
    return 1 if report.anomalies else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
