#!/usr/bin/env python3
"""Keeps the soak's checker honest: a clean history and state pass, and each doctored one fails.

    python3 tests/soak/checker_selftest.py        (standard library; < 1 s; a step of scripts/test)

A small model ledger (below) plays a history the way the server would and writes the state the soak
would read at the end; the checker must find nothing in it. Then each test changes one thing — an
acknowledged credit removed from the state, a commit applied twice, an unknown credit applied twice,
a refused reservation that took effect, a hold left active, a job left running, a fence handed out
twice, a rate limit that admitted too much, … — and the checker must report an anomaly that names it.
"""

from __future__ import annotations

import copy
import os
import sys
import unittest
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import checker  # noqa: E402


class ModelLedger:
    """Applies operations as tollgate would and records the history the soak would have."""

    def __init__(self) -> None:
        self.t = 0.0
        self.history: list[dict[str, Any]] = []
        self.accounts: dict[str, dict[str, Any]] = {}
        self.events: dict[str, list[dict[str, Any]]] = {}
        self.holds: dict[str, list[dict[str, Any]]] = {}
        self.jobs: dict[str, Any] = {}
        self.event_id = 0
        self.hold_seq = 0

    def op(self, kind: str, args: dict[str, Any], outcome: str, result: dict[str, Any] | None = None,
           code: str = "", attempts: int = 1) -> dict[str, Any]:
        self.t += 1.0
        o = {"op": len(self.history) + 1, "kind": kind, "worker": "w0", "args": args, "outcome": outcome,
             "code": code, "result": result, "t_invoke": self.t, "t_complete": self.t + 0.5,
             "attempts": [{"instance": "i0", "status": 0, "error": "timeout", "t0": self.t, "t1": self.t}] * attempts}
        self.history.append(o)
        return o

    def account(self, acct: str) -> None:
        self.accounts[acct] = {"account_id": acct, "available": 0, "reserved": 0, "used": 0, "expired": 0,
                               "purchased": 0, "overdraft_limit": 0, "active_holds": 0}
        self.events[acct] = []
        self.holds[acct] = []

    def _event(self, acct: str, type_: str, amount: int, **extra: Any) -> dict[str, Any]:
        self.event_id += 1
        a = self.accounts[acct]
        e = {"event_id": self.event_id, "account_id": acct, "type": type_, "amount": amount, **extra,
             "available_after": a["available"], "reserved_after": a["reserved"], "used_after": a["used"],
             "expired_after": a["expired"]}
        self.events[acct].append(e)
        return e

    def credit(self, acct: str, amount: int, ref: str, outcome: str = "ok", applied: bool = True) -> None:
        if applied:
            a = self.accounts[acct]
            a["available"] += amount
            a["purchased"] += amount
            self._event(acct, "credited", amount, reference=ref)
        self.op("credit", {"account_id": acct, "amount": amount, "reference": ref}, outcome)

    def reserve(self, acct: str, amount: int, rid: str, outcome: str = "ok", applied: bool = True) -> str | None:
        hold = None
        if applied:
            a = self.accounts[acct]
            self.hold_seq += 1
            hid = f"hold_{self.hold_seq}"
            a["available"] -= amount
            a["reserved"] += amount
            a["active_holds"] += 1
            hold = {"hold_id": hid, "account_id": acct, "request_id": rid, "amount": amount,
                    "committed_amount": 0, "status": "active", "expires_at": "2026-01-01T00:00:10.000Z"}
            self.holds[acct].append(hold)
            self._event(acct, "reserved", amount, hold_id=hid)
        self.op("reserve", {"account_id": acct, "amount": amount, "request_id": rid}, outcome,
                dict(hold) if hold and outcome == "ok" else None, code="insufficient_credits" if outcome == "refused" else "")
        return str(hold["hold_id"]) if hold else None

    def _hold(self, hid: str | None) -> dict[str, Any]:
        return next(h for hs in self.holds.values() for h in hs if h["hold_id"] == hid)

    def end(self, hid: str | None, how: str, amount: int | None = None) -> dict[str, Any]:
        h = self._hold(hid)
        a = self.accounts[h["account_id"]]
        used = (h["amount"] if amount is None else amount) if how == "committed" else 0
        a["reserved"] -= h["amount"]
        a["used"] += used
        a["available"] += h["amount"] - used
        a["active_holds"] -= 1
        h["status"], h["committed_amount"] = how, used
        self._event(h["account_id"], how, used if how == "committed" else h["amount"], hold_id=hid)
        return h

    def commit(self, hid: str | None, amount: int | None = None) -> None:
        h = self.end(hid, "committed", amount)
        args = {"hold_id": hid, "hold_amount": h["amount"]}
        if amount is not None:
            args["amount"] = amount
        self.op("commit", args, "ok", dict(h))

    def release(self, hid: str | None) -> None:
        h = self.end(hid, "released")
        self.op("release", {"hold_id": hid}, "ok", dict(h))

    def job(self, acct: str, cost: int, jid: str, end: str) -> None:
        hid = self.reserve(acct, cost, f"job:{jid}", outcome="ok")
        self.history.pop()  # a job's hold is not a client's reservation
        self.end(hid, "committed" if end == "completed" else "released")  # type: ignore[arg-type]
        self.jobs[jid] = {"client_request_id": jid, "account_id": acct, "cost": cost, "status": end, "hold_id": hid,
                          "attempts": 1}
        self.op("job_submit", {"client_request_id": jid, "account_id": acct, "cost": cost}, "ok", {"status": "pending"})

    def lock(self, kind: str, key: str, owner: str, fence: int, outcome: str = "ok") -> None:
        args: dict[str, Any] = {"key": key, "owner": owner}
        if kind != "lock_acquire":
            args["fence"] = fence
        self.op(kind, args, outcome, {"key": key, "owner": owner, "fence": fence} if outcome == "ok" else None)

    def ratelimit(self, key: str, allowed: bool) -> None:
        self.op("ratelimit", {"policy": "soak", "key": key}, "ok" if allowed else "refused",
                {"allowed": True} if allowed else None, code="" if allowed else "rate_limited")

    def state(self) -> dict[str, Any]:
        return {"backend": "model", "seed": 0, "settled": True,
                "config": {"ratelimit": {"limit": 3, "period_ms": 3000}},
                "accounts": self.accounts, "events": self.events, "holds": self.holds, "jobs": self.jobs,
                "locks": {"lk": {"key": "lk", "fence": 3}},
                "audit": {"accounts_checked": len(self.accounts), "violations": []}, "faults": {"kill9": 1}}


def clean_run() -> ModelLedger:
    m = ModelLedger()
    m.account("a")
    m.account("b")
    m.credit("a", 100, "cr-1")
    m.credit("b", 50, "cr-2")
    m.credit("a", 7, "cr-3", outcome="unknown", applied=True)     # no answer, but it happened
    m.credit("b", 9, "cr-4", outcome="unknown", applied=False)    # no answer, and it did not
    h1 = m.reserve("a", 10, "rq-1")
    m.commit(h1, 4)                                               # partial
    h2 = m.reserve("a", 5, "rq-2")
    m.commit(h2)                                                  # full
    h3 = m.reserve("b", 8, "rq-3")
    m.release(h3)
    h4 = m.reserve("b", 3, "rq-4", outcome="unknown", applied=True)
    m.end(h4, "expired")                                          # its client never heard; the reaper ended it
    m.events["b"][-1]["at"] = "2026-01-01T00:00:10.150Z"          # after its expires_at
    m.reserve("b", 500, "rq-5", outcome="refused", applied=False)
    m.job("a", 2, "job-1", "completed")
    m.job("b", 2, "job-2", "failed")
    m.lock("lock_acquire", "lk", "w0", 1)
    m.lock("lock_renew", "lk", "w0", 1)
    m.lock("lock_acquire", "lk", "w1", 1, outcome="refused")
    m.lock("lock_release", "lk", "w0", 1)
    m.lock("lock_acquire", "lk", "w1", 2)
    m.lock("lock_acquire", "lk", "w0", 3)
    for i in range(6):                                            # one a second: within 3 per 3 s
        m.ratelimit("rl", allowed=True)
    return m


def anomalies(history: list[dict[str, Any]], state: dict[str, Any]) -> list[str]:
    return checker.check(history, state).anomalies


def find_event(state: dict[str, Any], pred: Any) -> tuple[str, int]:
    for acct, events in state["events"].items():
        for i, e in enumerate(events):
            if pred(e):
                return acct, i
    raise AssertionError("no such event")


def refold_row(state: dict[str, Any], acct: str) -> None:
    """After doctoring the log, make the row and the *_after values agree with it again, so that only
    the history can tell (the harder case: the store is self-consistent, the clients' story is not)."""
    b = {"available": 0, "reserved": 0, "used": 0, "expired": 0, "purchased": 0, "active_holds": 0}
    amounts: dict[str, int] = {}
    for e in state["events"][acct]:
        t, n = e["type"], e["amount"]
        if t == "credited":
            b["available"] += n
            b["purchased"] += n
        elif t == "reserved":
            amounts[e["hold_id"]] = n
            b["available"] -= n
            b["reserved"] += n
            b["active_holds"] += 1
        elif t in ("committed", "released", "expired"):
            h = amounts[e["hold_id"]]
            used = n if t == "committed" else 0
            b["reserved"] -= h
            b["used"] += used
            b["available"] += h - used
            b["active_holds"] -= 1
        e["available_after"], e["reserved_after"], e["used_after"] = b["available"], b["reserved"], b["used"]
        e["expired_after"] = b["expired"]
    state["accounts"][acct].update(b)


class CheckerSelfTest(unittest.TestCase):
    def setUp(self) -> None:
        m = clean_run()
        self.history, self.state = m.history, m.state()

    def assertAnomaly(self, must_mention: str, history: list[dict[str, Any]] | None = None,
                      state: dict[str, Any] | None = None) -> None:
        found = anomalies(history if history is not None else self.history, state if state is not None else self.state)
        self.assertTrue(found, "the checker found nothing wrong in a doctored run")
        self.assertTrue(any(must_mention in a for a in found), f"no anomaly mentions {must_mention!r}: {found}")

    def test_the_clean_run_has_no_anomaly(self) -> None:
        self.assertEqual(anomalies(self.history, self.state), [])
        text, summary = checker.summarize(self.history, self.state, checker.check(self.history, self.state))
        self.assertEqual(summary["anomalies"], 0)
        self.assertEqual(summary["unknown"], 3)
        self.assertIn("anomalies: 0", text)

    def test_an_acknowledged_credit_lost_from_the_state(self) -> None:
        s = copy.deepcopy(self.state)
        acct, i = find_event(s, lambda e: e.get("reference") == "cr-1")
        del s["events"][acct][i]
        refold_row(s, acct)
        self.assertAnomaly("acknowledged credit cr-1", state=s)

    def test_a_lost_credit_is_seen_by_the_fold_when_only_the_row_keeps_it(self) -> None:
        s = copy.deepcopy(self.state)
        acct, i = find_event(s, lambda e: e.get("reference") == "cr-1")
        del s["events"][acct][i]
        self.assertAnomaly("differ from the fold", state=s)

    def test_an_unknown_credit_applied_twice(self) -> None:
        s = copy.deepcopy(self.state)
        acct, i = find_event(s, lambda e: e.get("reference") == "cr-3")
        twin = dict(s["events"][acct][i], event_id=10_000)
        s["events"][acct].append(twin)
        refold_row(s, acct)
        self.assertAnomaly("unknown credit cr-3 applied 2 times", state=s)

    def test_a_commit_applied_twice(self) -> None:
        s = copy.deepcopy(self.state)
        acct, i = find_event(s, lambda e: e["type"] == "committed")
        s["events"][acct].append(dict(s["events"][acct][i], event_id=10_000))
        self.assertAnomaly("ended twice", state=s)

    def test_a_partial_commit_charged_in_full(self) -> None:
        s = copy.deepcopy(self.state)
        acct, i = find_event(s, lambda e: e["type"] == "committed" and e["amount"] == 4)
        s["events"][acct][i]["amount"] = 10
        refold_row(s, acct)
        self.assertAnomaly("no commit asked that", state=s)

    def test_a_refused_reservation_that_took_effect(self) -> None:
        s = copy.deepcopy(self.state)
        s["holds"]["b"].append({"hold_id": "hold_99", "account_id": "b", "request_id": "rq-5", "amount": 500,
                                "committed_amount": 0, "status": "expired", "expires_at": "x"})
        self.assertAnomaly("refused reserve rq-5", state=s)

    def test_an_acknowledged_reservation_missing(self) -> None:
        s = copy.deepcopy(self.state)
        s["holds"]["a"] = [h for h in s["holds"]["a"] if h["request_id"] != "rq-1"]
        self.assertAnomaly("acknowledged reserve rq-1 has 0 holds", state=s)

    def test_a_hold_left_active_past_its_ttl(self) -> None:
        s = copy.deepcopy(self.state)
        acct, i = find_event(s, lambda e: e["type"] == "expired")
        del s["events"][acct][i]
        refold_row(s, acct)
        for h in s["holds"][acct]:
            if h["status"] == "expired":
                h["status"] = "active"
        self.assertAnomaly("still active", state=s)

    def test_a_hold_expired_before_its_ttl(self) -> None:
        s = copy.deepcopy(self.state)
        acct, i = find_event(s, lambda e: e["type"] == "expired")
        s["events"][acct][i]["at"] = "2026-01-01T00:00:09.999Z"
        self.assertAnomaly("before its expires_at", state=s)

    def test_a_phantom_credit_nobody_asked_for(self) -> None:
        s = copy.deepcopy(self.state)
        s["events"]["a"].append({"event_id": 10_000, "account_id": "a", "type": "credited", "amount": 5,
                                 "reference": "nobody", "available_after": 0, "reserved_after": 0, "used_after": 0,
                                 "expired_after": 0})
        refold_row(s, "a")
        self.assertAnomaly("that no client asked for", state=s)

    def test_the_bank_total_off_when_a_refused_credit_took_effect(self) -> None:
        h = copy.deepcopy(self.history)
        for o in h:
            if o["args"].get("reference") == "cr-3":
                o["outcome"], o["code"] = "refused", "invalid_request"
        self.assertAnomaly("refused credit cr-3", history=h)

    def test_a_job_left_running(self) -> None:
        s = copy.deepcopy(self.state)
        s["jobs"]["job-1"]["status"] = "running"
        self.assertAnomaly("left unended", state=s)

    def test_a_completed_job_whose_hold_was_released(self) -> None:
        s = copy.deepcopy(self.state)
        s["jobs"]["job-2"]["status"] = "completed"
        self.assertAnomaly("job job-2 completed but its hold", state=s)

    def test_a_completed_job_charged_another_amount(self) -> None:
        s = copy.deepcopy(self.state)
        hid = s["jobs"]["job-1"]["hold_id"]
        acct, i = find_event(s, lambda e: e["type"] == "committed" and e.get("hold_id") == hid)
        s["events"][acct][i]["amount"] = 1
        refold_row(s, acct)
        self.assertAnomaly("job job-1 of cost 2 completed and charged [1]", state=s)

    def test_an_acknowledged_job_missing(self) -> None:
        s = copy.deepcopy(self.state)
        s["jobs"]["job-1"] = None
        self.assertAnomaly("acknowledged job job-1 does not exist", state=s)

    def test_one_fence_for_two_owners(self) -> None:
        h = copy.deepcopy(self.history)
        last = [o for o in h if o["kind"] == "lock_acquire" and o["outcome"] == "ok"][-1]
        last["result"]["fence"] = 2
        self.assertAnomaly("fence 2 held by", history=h)

    def test_a_fence_going_back(self) -> None:
        h = copy.deepcopy(self.history)
        last = [o for o in h if o["kind"] == "lock_acquire" and o["outcome"] == "ok"][-1]
        last["args"]["owner"] = last["result"]["owner"] = "w9"
        last["result"]["fence"] = 1
        self.assertAnomaly("acquired fence 1 after", history=h)

    def test_a_stale_renew_acknowledged(self) -> None:
        h = copy.deepcopy(self.history)
        m = ModelLedger()
        m.t = 1000.0
        m.lock("lock_renew", "lk", "w0", 1)  # w1 acquired fence 2 before: w0's fence 1 is stale
        h += m.history
        self.assertAnomaly("renew by w0 with fence 1 acknowledged after another owner", history=h)

    def test_a_rate_limit_that_admits_too_much(self) -> None:
        h = copy.deepcopy(self.history)
        m = ModelLedger()
        m.t = 2000.0
        for _ in range(8):
            m.ratelimit("rl", allowed=True)
            m.t -= 0.9  # 8 within ~1 s: a policy of 3 per 3 s admits at most 3 + 1
        h += m.history
        self.assertAnomaly("rate limit soak/rl", history=h)

    def test_an_audit_violation(self) -> None:
        s = copy.deepcopy(self.state)
        s["audit"]["violations"] = [{"account_id": "a", "message": "x"}]
        self.assertAnomaly("GET /v1/audit", state=s)

    def test_an_instance_that_crashed_by_itself(self) -> None:
        s = copy.deepcopy(self.state)
        s["unexpected_exits"] = ["i1 exited by itself with signal 6"]
        self.assertAnomaly("an instance crashed", state=s)

    def test_the_last_line_is_one_json_object(self) -> None:
        import json
        text, summary = checker.summarize(self.history, self.state, checker.check(self.history, self.state))
        line = json.dumps(summary, sort_keys=True)
        for key in ("operations", "unknown", "faults", "anomalies", "seed"):
            self.assertIn(key, json.loads(line))


if __name__ == "__main__":
    unittest.main(verbosity=1)
