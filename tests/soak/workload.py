"""The soak's clients: worker threads that call every kind of operation and record what they saw.

Each call is made with raw ``http.client`` (a fresh connection per attempt, through a random one of
the fault proxies in front of the instances), so that the history says exactly which attempts got
an answer. A call is retried with the same body — the same request id — after an unknown attempt
(no answer, 5xx), up to ATTEMPTS_MAX, with a bounded back-off honouring Retry-After; a definite
answer (2xx, 4xx) ends it. Rate-limit checks are not idempotent: one attempt each.

Thread safety: one Worker per thread; they share the History (thread-safe) and read-only settings.
"""

from __future__ import annotations

import datetime
import http.client
import json
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from history import Attempt, History, Operation

ATTEMPTS_MAX = 6
ATTEMPT_TIMEOUT_S = 3.0
BACKOFF_MAX_S = 1.0
MY_HOLDS_MAX = 16  # holds a worker remembers to commit, release or extend
MY_JOBS_MAX = 16


@dataclass
class Settings:
    endpoints: list[tuple[str, int]]  # (name, port) of the proxies in front of the instances
    admin_key: str
    accounts: list[str]
    lock_keys: list[str]
    ratelimit_keys: list[str]
    provider: str | None
    hold_ttl_ms_range: tuple[int, int]
    lock_ttl_ms_range: tuple[int, int]


def request(endpoint: tuple[str, int], key: str, method: str, path: str, body: dict[str, Any] | None,
            timeout_s: float) -> tuple[int, dict[str, Any] | None, str, float]:
    """One HTTP exchange: (status, JSON body or None, error, retry_after_s). status 0: no answer."""
    conn = http.client.HTTPConnection("127.0.0.1", endpoint[1], timeout=timeout_s)
    try:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {key}"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        # http.client takes an answer cut inside its head for a whole head (EOF ends the headers): a
        # tollgate answer always has a Content-Length, so one without it, or with a shorter body, was cut.
        length = resp.getheader("Content-Length")
        if length is None or not length.isdigit() or int(length) != len(raw):
            return 0, None, "cut_answer", 0.0
        retry_after = 0.0
        try:
            retry_after = float(resp.getheader("Retry-After") or 0)
        except ValueError:
            pass
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            return 0, None, "bad_body", 0.0  # a cut answer that still parsed as HTTP: unknown
        if not isinstance(parsed, dict):
            parsed = None
        code = (parsed or {}).get("code", "") if resp.status >= 400 else ""
        return resp.status, parsed, str(code), retry_after
    except TimeoutError:
        return 0, None, "timeout", 0.0
    except (OSError, http.client.HTTPException) as e:
        return 0, None, type(e).__name__, 0.0
    finally:
        conn.close()


class Caller:
    """Makes one operation's attempts and records it."""

    def __init__(self, history: History, settings: Settings, rng: random.Random, name: str,
                 stop: threading.Event) -> None:
        self.history = history
        self.s = settings
        self.rng = rng
        self.name = name
        self.stop = stop

    def call(self, kind: str, args: dict[str, Any], method: str, path: str, body: dict[str, Any] | None,
             attempts_max: int = ATTEMPTS_MAX) -> Operation:
        op = self.history.new_op(kind, self.name, args)
        op.t_invoke = time.monotonic() - self.history.t0
        backoff = 0.1
        for n in range(attempts_max):
            endpoint = self.rng.choice(self.s.endpoints)
            t0 = time.monotonic() - self.history.t0
            status, parsed, error, retry_after = request(endpoint, self.s.admin_key, method, path, body,
                                                         ATTEMPT_TIMEOUT_S)
            t1 = time.monotonic() - self.history.t0
            op.attempts.append(Attempt(endpoint[0], status, error, round(t0, 4), round(t1, 4)))
            if 200 <= status < 500:
                if status < 300:
                    op.result = parsed
                else:
                    op.result = {k: v for k, v in (parsed or {}).items() if k in ("code", "detail", "fence")}
                break
            if n + 1 == attempts_max:
                break
            # Unknown: the same body again, after a bounded back-off (longer while stopping is not asked).
            time.sleep(min(BACKOFF_MAX_S, max(backoff, min(retry_after, 2.0))) * (0.5 + self.rng.random()))
            backoff = min(BACKOFF_MAX_S, backoff * 2)
        op.t_complete = time.monotonic() - self.history.t0
        op.classify()
        self.history.record(op)
        return op


@dataclass
class MyHold:
    hold_id: str
    amount: int


@dataclass
class MyLock:
    key: str
    fence: int


@dataclass
class Worker:
    """Calls a seeded mix of operations until `stop` is set or `ops_max` have been made."""

    index: int
    history: History
    settings: Settings
    seed: int
    stop: threading.Event
    ops_max: int = 100_000
    holds: list[MyHold] = field(default_factory=list)
    jobs: list[str] = field(default_factory=list)
    locks: dict[str, MyLock] = field(default_factory=dict)

    def run(self) -> None:
        rng = random.Random(f"{self.seed}:worker:{self.index}")
        self.rng = rng
        self.caller = Caller(self.history, self.settings, rng, f"w{self.index}", self.stop)
        self.seq = 0
        choices: list[tuple[Callable[[], None], int]] = [
            (self.credit, 8), (self.debit, 3), (self.reserve, 20), (self.commit, 12), (self.release, 5),
            (self.extend, 4), (self.lock, 10), (self.ratelimit, 5)]
        if self.settings.provider:
            choices += [(self.submit_job, 6), (self.cancel_job, 1)]
        actions = [c for c, _ in choices]
        weights = [w for _, w in choices]
        for _ in range(self.ops_max):
            if self.stop.is_set():
                break
            rng.choices(actions, weights)[0]()

    def _id(self, prefix: str) -> str:
        self.seq += 1
        return f"{prefix}-w{self.index}-{self.seq}"

    def _account(self) -> str:
        return self.rng.choice(self.settings.accounts)

    # --- money ------------------------------------------------------------------------------------
    def credit(self) -> None:
        acct, amount, ref = self._account(), self.rng.randint(1, 20), self._id("cr")
        body: dict[str, Any] = {"amount": amount, "reference": ref}
        if self.rng.random() < 0.4:
            # A credit lot that expires within the run (and one spent first): lot expiry under the faults.
            expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=self.rng.uniform(1, 6))
            body["expires_at"] = expires.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
            body["priority"] = self.rng.choice([10, 50, 90])
        self.caller.call("credit", {"account_id": acct, "amount": amount, "reference": ref}, "POST",
                         f"/v1/accounts/{acct}/credits", body)

    def debit(self) -> None:
        acct, amount, ref = self._account(), self.rng.randint(1, 6), self._id("db")
        self.caller.call("debit", {"account_id": acct, "amount": amount, "reference": ref}, "POST",
                         f"/v1/accounts/{acct}/debits", {"amount": amount, "reference": ref, "reason": "soak"})

    def reserve(self) -> None:
        acct, amount, rid = self._account(), self.rng.randint(1, 8), self._id("rq")
        body: dict[str, Any] = {"account_id": acct, "amount": amount, "request_id": rid}
        if self.rng.random() < 0.7:
            body["ttl_ms"] = self.rng.randint(*self.settings.hold_ttl_ms_range)
        op = self.caller.call("reserve", dict(body), "POST", "/v1/holds", body)
        if op.outcome == "ok" and op.result and len(self.holds) < MY_HOLDS_MAX:
            self.holds.append(MyHold(op.result["hold_id"], amount))

    def _pick_hold(self, remove: bool) -> MyHold | None:
        if not self.holds:
            return None
        i = self.rng.randrange(len(self.holds))
        return self.holds.pop(i) if remove else self.holds[i]

    def commit(self) -> None:
        h = self._pick_hold(remove=True)
        if h is None:
            return self.reserve()
        body: dict[str, Any] = {}
        if self.rng.random() < 0.5:
            body["amount"] = self.rng.randint(1, h.amount)
        self.caller.call("commit", {"hold_id": h.hold_id, "hold_amount": h.amount, **body}, "POST",
                         f"/v1/holds/{h.hold_id}/commit", body)

    def release(self) -> None:
        h = self._pick_hold(remove=True)
        if h is None:
            return self.reserve()
        self.caller.call("release", {"hold_id": h.hold_id}, "POST", f"/v1/holds/{h.hold_id}/release",
                         {"reason": "soak"})

    def extend(self) -> None:
        h = self._pick_hold(remove=False)
        if h is None:
            return self.reserve()
        ttl = self.rng.randint(*self.settings.hold_ttl_ms_range)
        self.caller.call("extend", {"hold_id": h.hold_id, "ttl_ms": ttl}, "POST", f"/v1/holds/{h.hold_id}/extend",
                         {"ttl_ms": ttl})

    # --- jobs -------------------------------------------------------------------------------------
    def submit_job(self) -> None:
        acct, cost, jid = self._account(), self.rng.randint(1, 5), self._id("job")
        body = {"client_request_id": jid, "account_id": acct, "cost": cost, "provider": self.settings.provider,
                "input": {"prompt": jid}}
        op = self.caller.call("job_submit", {"client_request_id": jid, "account_id": acct, "cost": cost}, "POST",
                              "/v1/jobs", body)
        if op.outcome == "ok" and len(self.jobs) < MY_JOBS_MAX:
            self.jobs.append(jid)

    def cancel_job(self) -> None:
        if not self.jobs:
            return
        jid = self.jobs.pop(self.rng.randrange(len(self.jobs)))
        self.caller.call("job_cancel", {"client_request_id": jid}, "POST", f"/v1/jobs/{jid}/cancel", {})

    # --- locks and rate limits --------------------------------------------------------------------
    def lock(self) -> None:
        key = self.rng.choice(self.settings.lock_keys)
        owner = f"w{self.index}"
        held = self.locks.get(key)
        ttl = self.rng.randint(*self.settings.lock_ttl_ms_range)
        if held is None:
            op = self.caller.call("lock_acquire", {"key": key, "owner": owner, "ttl_ms": ttl}, "POST",
                                  f"/v1/locks/{key}/acquire", {"owner": owner, "ttl_ms": ttl})
            if op.outcome == "ok" and op.result:
                self.locks[key] = MyLock(key, int(op.result["fence"]))
        elif self.rng.random() < 0.6:
            op = self.caller.call("lock_renew", {"key": key, "owner": owner, "fence": held.fence, "ttl_ms": ttl},
                                  "POST", f"/v1/locks/{key}/renew", {"owner": owner, "fence": held.fence, "ttl_ms": ttl})
            if op.outcome != "ok":
                del self.locks[key]
        else:
            del self.locks[key]
            self.caller.call("lock_release", {"key": key, "owner": owner, "fence": held.fence}, "POST",
                             f"/v1/locks/{key}/release", {"owner": owner, "fence": held.fence})

    def ratelimit(self) -> None:
        key = self.rng.choice(self.settings.ratelimit_keys)
        self.caller.call("ratelimit", {"policy": "soak", "key": key}, "POST", "/v1/ratelimits/soak/check",
                         {"key": key}, attempts_max=1)
