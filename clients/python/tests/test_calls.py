"""Every call of the API once, against a real server (with the fake provider for jobs and a
configured rate limit): typed results, the server's answers and refusals as exceptions."""

from __future__ import annotations

import datetime
import socket
import time
import unittest
from typing import ClassVar

from support import Processes, ServerTestCase, fast_client, start_fake_provider, unused_port
from tollgate_client import (Account, ForbiddenError, Hold, InsufficientCreditsError, InvalidArgumentError, Job,
                             NotFoundError, ProblemError, RateLimitedError, RefundExceedsChargeError, TransportError)


class CallsTest(ServerTestCase):
    # A provider that accepts connections and never answers: a job on it runs until cancelled.
    stuck: ClassVar[socket.socket]

    @classmethod
    def prepare(cls, processes: Processes) -> str:
        provider_port = start_fake_provider(processes)
        cls.stuck = socket.socket()
        cls.stuck.bind(("127.0.0.1", 0))
        cls.stuck.listen(16)
        stuck_port = cls.stuck.getsockname()[1]
        return f"""
[providers.imagegen]
url = "http://127.0.0.1:{provider_port}/generate"
status_url = "http://127.0.0.1:{provider_port}/status/{{id}}"
timeout_ms = 3000
expected_duration_ms = 200

[providers.stuck]
url = "http://127.0.0.1:{stuck_port}/generate"
timeout_ms = 60000
expected_duration_ms = 1000

[ratelimits.login]
limit = 2
period_ms = 60000
store = "shared"
"""

    @classmethod
    def tearDownClass(cls) -> None:
        super().tearDownClass()
        cls.stuck.close()

    def test_operations(self) -> None:
        self.assertEqual(self.admin.healthz(), "ok")
        ready = self.admin.readyz()
        for _ in range(50):  # ready once the reaper has run (within its 1 s interval of the start)
            if ready.ready:
                break
            self.assertEqual(ready.status, "not ready")
            time.sleep(0.1)
            ready = self.admin.readyz()
        self.assertTrue(ready.ready)
        self.assertEqual((ready.status, ready.database), ("ready", "ok"))
        self.assertIn("tollgate_", self.admin.metrics())
        self.assertEqual(self.admin.openapi()["openapi"][:2], "3.")
        audit = self.admin.audit()
        self.assertGreaterEqual(audit.accounts_checked, 1)
        self.assertEqual(audit.violations, [])
        self.assertEqual(self.admin.audit(account_id=self.account).accounts_checked, 1)

    def test_accounts_and_transfers(self) -> None:
        a = self.account
        created = self.admin.create_account(f"{a}-new", overdraft_limit=0, max_active_holds=3)
        self.assertIsInstance(created, Account)
        self.assertEqual(self.admin.last_call.status if self.admin.last_call else 0, 201)
        self.assertEqual((created.available, created.max_active_holds, created.frozen), (0, 3, False))
        self.assertIsNone(created.frozen_reason)
        self.admin.create_account(f"{a}-new", overdraft_limit=0, max_active_holds=3)
        self.assertEqual(self.admin.last_call.status if self.admin.last_call else 0, 200)
        with self.assertRaises(ProblemError) as conflict:
            self.admin.create_account(f"{a}-new", max_active_holds=4)
        self.assertEqual((conflict.exception.status, conflict.exception.code), (409, "conflict"))

        credit = self.admin.credit(a, 5, f"buy-{a}")
        self.assertEqual((credit.event.type, credit.event.amount, credit.account.available), ("credited", 5, 15))
        again = self.admin.credit(a, 5, f"buy-{a}")
        self.assertEqual(again.account.purchased, 15, "the same reference adds nothing")
        with self.assertRaises(ProblemError) as mismatch:
            self.admin.credit(a, 6, f"buy-{a}")
        self.assertEqual((mismatch.exception.status, mismatch.exception.code), (422, "idempotency_mismatch"))
        debit = self.admin.debit(a, 4, f"refund-{a}", "refund")
        self.assertEqual((debit.event.type, debit.event.reason, debit.account.available), ("debited", "refund", 11))
        record = self.admin.get_transfer(f"refund-{a}")
        self.assertEqual((record.kind, record.amount, record.account_id), ("debit", 4, a))

        updated = self.admin.update_account(a, frozen=True, max_active_holds=2)
        self.assertEqual((updated.frozen, updated.max_active_holds), (True, 2))
        self.assertIsNone(updated.frozen_reason, "an admin's freeze has no reason")
        with self.assertRaises(ProblemError) as frozen:
            self.admin.reserve(a, 1)
        self.assertEqual(frozen.exception.code, "account_frozen")
        unfrozen = self.admin.update_account(a, frozen=False, max_active_holds=None)
        self.assertEqual((unfrozen.frozen, unfrozen.max_active_holds), (False, None))
        self.assertIsNone(unfrozen.low_balance_threshold)

        events = self.admin.events(a)
        self.assertEqual([e.type for e in events.events],
                         ["credited", "credited", "debited", "account_updated", "account_updated"])
        self.assertEqual(events.next_after, events.events[-1].event_id)
        rest = self.admin.events(a, after=events.events[1].event_id, limit=1)
        self.assertEqual([e.type for e in rest.events], ["debited"])
        feed = self.admin.feed(after=events.events[0].event_id - 1, limit=1000)
        self.assertIn(events.events[0].event_id, [e.event_id for e in feed.events])
        waited = self.admin.feed(after=feed.next_after, wait_ms=0)
        self.assertEqual(waited.events, [])

        # Balance notices: 11 → 9 crosses a threshold of 10 down, 9 → 14 back up.
        noticed = self.admin.update_account(a, low_balance_threshold=10)
        self.assertEqual((noticed.low_balance_threshold, noticed.available), (10, 11))
        self.admin.debit(a, 2, f"notice-{a}", "low")
        self.admin.credit(a, 5, f"notice-back-{a}")
        tail = self.admin.events(a, after=events.next_after)
        self.assertEqual([e.type for e in tail.events],
                         ["account_updated", "debited", "balance_low", "credited", "balance_recovered"])
        self.assertEqual((tail.events[2].amount, tail.events[2].available_after), (0, 9))
        self.assertIsNone(self.admin.update_account(a, low_balance_threshold=None).low_balance_threshold)

        first = self.admin.list_accounts(limit=1)
        self.assertEqual(len(first.accounts), 1)
        self.assertTrue(first.has_more)
        second = self.admin.list_accounts(limit=1, starting_after=first.accounts[0].account_id)
        self.assertGreater(second.accounts[0].account_id, first.accounts[0].account_id)
        with self.assertRaises(NotFoundError) as missing:
            self.admin.get_account(f"{a}-missing")
        self.assertEqual(missing.exception.status, 404)

    def test_keys_and_what_an_account_key_may_do(self) -> None:
        a = self.account
        key = self.admin.create_key(a)
        self.assertTrue(key.secret)
        self.assertNotIn(key.secret, repr(key))
        listed = self.admin.list_keys(account_id=a)
        self.assertEqual([(k.key_id, k.kind, k.revoked) for k in listed.keys], [(key.key_id, "account", False)])
        self.assertEqual(len(self.admin.list_keys(limit=1).keys), 1)
        with fast_client(self.server.url, key.secret) as kiosk:
            self.assertEqual(kiosk.get_account(a).available, 10)
            with kiosk.hold(a, 1) as h:
                h.commit()
            with self.assertRaises(NotFoundError):
                kiosk.get_account(self.other_account())  # another account: as if it did not exist
            with self.assertRaises(ProblemError) as forbidden:
                kiosk.credit(a, 1, f"self-{a}")
            self.assertEqual((forbidden.exception.status, forbidden.exception.code), (403, "forbidden"))
            revoked = self.admin.revoke_key(key.key_id)
            self.assertEqual((revoked.key_id, revoked.revoked), (key.key_id, True))
            with self.assertRaises(ProblemError) as unauthorized:
                kiosk.get_account(a)
            self.assertEqual((unauthorized.exception.status, unauthorized.exception.code), (401, "unauthorized"))

    def test_keys_with_scopes_expiry_and_a_name(self) -> None:
        a = self.account
        expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=30)
        key = self.admin.create_key(a, scopes=["read", "holds:write"], expires_at=expires, name="kiosk 3")
        self.assertEqual(key.scopes, ["holds:write", "read"])  # the canonical order
        self.assertEqual((key.account_id, key.name), (a, "kiosk 3"))
        self.assertIsNotNone(key.expires_at)
        everything = self.admin.create_key(a)
        self.assertEqual((everything.scopes, everything.name, everything.expires_at),
                         (["holds:write", "jobs:write", "read"], None, None))
        listed = {k.key_id: k for k in self.admin.list_keys(account_id=a).keys}
        self.assertEqual((listed[key.key_id].scopes, listed[key.key_id].name), (["holds:write", "read"], "kiosk 3"))
        self.assertEqual(listed[key.key_id].expires_at, key.expires_at)
        self.assertIsNone(listed[everything.key_id].expires_at)

        reader = self.admin.create_key(a, scopes=["read"])
        with fast_client(self.server.url, reader.secret) as kiosk:
            me = kiosk.whoami()
            self.assertEqual((me.key_id, me.account_id, me.scopes), (reader.key_id, a, ["read"]))
            self.assertEqual(kiosk.get_account(a).available, 10)
            with self.assertRaises(ForbiddenError) as forbidden:
                kiosk.reserve(a, 1)
            self.assertEqual((forbidden.exception.status, forbidden.exception.code), (403, "forbidden"))
            self.assertEqual(forbidden.exception.missing_scope, "holds:write")
            self.assertIn("holds:write", forbidden.exception.detail)
            with self.assertRaises(ForbiddenError) as no_jobs:
                kiosk.submit_job(a, 1, "imagegen", {"prompt": "x"})
            self.assertEqual(no_jobs.exception.missing_scope, "jobs:write")
        self.assert_balances(a, available=10, reserved=0, used=0)

        admin_me = self.admin.whoami()
        self.assertEqual((admin_me.key_id, admin_me.account_id, admin_me.scopes, admin_me.created_at),
                         ("admin", None, ["admin"], None))

    def test_admin_keys_read_only_and_expired(self) -> None:
        auditor = self.admin.create_admin_key("admin:read", name="auditor")
        self.assertEqual((auditor.account_id, auditor.scopes, auditor.name), (None, ["admin:read"], "auditor"))
        with fast_client(self.server.url, auditor.secret) as reader:
            self.assertEqual(reader.whoami().scopes, ["admin:read"])
            self.assertGreaterEqual(len(reader.list_accounts().accounts), 1)
            self.assertEqual(reader.audit().violations, [])
            with self.assertRaises(ForbiddenError) as forbidden:
                reader.credit(self.account, 1, f"auditor-{self.account}")
            self.assertEqual(forbidden.exception.missing_scope, "admin")
        with self.assertRaises(ProblemError) as bad:
            self.admin.create_key(self.account, expires_at="2020-01-01T00:00:00Z")  # not in the future
        self.assertEqual((bad.exception.status, bad.exception.code), (400, "invalid_request"))
        self.assertIsNone(bad.exception.missing_scope)
        soon = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=1)
        brief = self.admin.create_key(self.account, expires_at=soon)
        time.sleep(1.5)
        with fast_client(self.server.url, brief.secret) as late:
            with self.assertRaises(ProblemError) as expired:
                late.get_account(self.account)
        self.assertEqual((expired.exception.status, expired.exception.code), (401, "unauthorized"))
        self.assertIn("expired", expired.exception.detail)

    def test_webhook_endpoints(self) -> None:
        made = self.admin.create_webhook_endpoint("https://hooks.example/py", event_types=["balance_low"],
                                                  account_id=self.account, description="py")
        self.assertTrue(made.secret and made.secret.startswith("whsec_"))
        self.assertNotIn(made.secret, repr(made))
        self.assertEqual((made.event_types, made.account_id, made.status), (["balance_low"], self.account, "enabled"))
        read = self.admin.get_webhook_endpoint(made.endpoint_id)
        self.assertIsNone(read.secret)
        self.assertIn(made.endpoint_id, [e.endpoint_id for e in self.admin.list_webhook_endpoints().endpoints])
        changed = self.admin.update_webhook_endpoint(made.endpoint_id, status="disabled", event_types=None)
        self.assertEqual((changed.status, changed.event_types), ("disabled", None))
        rotated = self.admin.rotate_webhook_secret(made.endpoint_id)
        self.assertNotEqual(rotated.secret, made.secret)
        self.assertIsNotNone(rotated.previous_secret_expires_at)
        with self.assertRaises(ProblemError) as bad:
            self.admin.create_webhook_endpoint("ftp://hooks.example/")
        self.assertEqual((bad.exception.status, bad.exception.code), (400, "invalid_request"))
        deleted = self.admin.delete_webhook_endpoint(made.endpoint_id)
        self.assertEqual((deleted.endpoint_id, deleted.deleted), (made.endpoint_id, True))
        with self.assertRaises(NotFoundError):
            self.admin.get_webhook_endpoint(made.endpoint_id)

    def test_webhook_deliveries_and_replay(self) -> None:
        # Nothing listens at the unused port: each attempt fails, with an error and no status code.
        made = self.admin.create_webhook_endpoint(f"http://127.0.0.1:{unused_port()}/", account_id=self.account)
        self.assertIsNotNone(made.delivery_cursor)
        self.admin.credit(self.account, 1, f"hook-{self.account}")
        self.admin.credit(self.account, 1, f"hook-2-{self.account}")
        deadline = time.monotonic() + 20
        while True:
            page = self.admin.list_webhook_deliveries(made.endpoint_id)
            if len(page.deliveries) == 2 and all(d.attempts >= 1 for d in page.deliveries):
                break
            self.assertLess(time.monotonic(), deadline, f"no attempts recorded: {page}")
            time.sleep(0.2)
        newest, oldest = page.deliveries
        self.assertGreater(newest.event_id, oldest.event_id)  # newest event first
        self.assertEqual((newest.endpoint_id, newest.event_type, newest.status), (made.endpoint_id, "credited",
                                                                                 "pending"))
        self.assertIsNone(newest.last_status_code)
        self.assertTrue(newest.last_error)
        self.assertIsNotNone(newest.next_attempt_at)
        first = self.admin.list_webhook_deliveries(made.endpoint_id, status="pending", limit=1)
        self.assertEqual(([d.webhook_id for d in first.deliveries], first.has_more), ([newest.webhook_id], True))
        rest = self.admin.list_webhook_deliveries(made.endpoint_id, limit=1, starting_after=newest.webhook_id)
        self.assertEqual(([d.webhook_id for d in rest.deliveries], rest.has_more), ([oldest.webhook_id], False))
        self.assertEqual(self.admin.list_webhook_deliveries(made.endpoint_id, status="delivered").deliveries, [])

        replayed = self.admin.replay_webhook_endpoint(made.endpoint_id, after=oldest.event_id - 1)
        self.assertEqual(self.admin.last_call.status if self.admin.last_call else 0, 202)
        self.assertEqual(replayed.endpoint_id, made.endpoint_id)
        self.assertIsNone(replayed.secret)
        self.assertLessEqual(replayed.delivery_cursor or 0, oldest.event_id - 1)
        with self.assertRaises(InvalidArgumentError):
            self.admin.replay_webhook_endpoint(made.endpoint_id, after=-1)
        with self.assertRaises(InvalidArgumentError):
            self.admin.list_webhook_deliveries(made.endpoint_id, status="sent")
        with self.assertRaises(NotFoundError):
            self.admin.replay_webhook_endpoint("we_0000000000000000", after=0)
        self.admin.delete_webhook_endpoint(made.endpoint_id)

    def other_account(self) -> str:
        other = f"{self.account}-other"
        self.admin.create_account(other)
        return other

    def test_holds(self) -> None:
        a = self.account
        hold = self.admin.reserve(a, 4, request_id=f"gen-{a}", ttl_ms=60_000, metadata={"order": "o-1"})
        self.assertIsInstance(hold, Hold)
        self.assertEqual((hold.status, hold.amount, hold.metadata), ("active", 4, {"order": "o-1"}))
        self.assertEqual(self.admin.reserve(a, 4, request_id=f"gen-{a}").hold_id, hold.hold_id)
        with self.assertRaises(ProblemError) as mismatch:
            self.admin.reserve(a, 5, request_id=f"gen-{a}")
        self.assertEqual(mismatch.exception.code, "idempotency_mismatch")
        self.assertEqual(self.admin.get_hold(hold.hold_id).request_id, f"gen-{a}")
        extended = self.admin.extend(hold.hold_id, 120_000)
        self.assertGreater(extended.expires_at, hold.expires_at)
        committed = self.admin.commit(hold.hold_id, 3)
        self.assertEqual((committed.status, committed.committed_amount), ("committed", 3))
        self.assertEqual(self.admin.commit(hold.hold_id, 3).committed_amount, 3, "committing again moves nothing")

        other = self.admin.reserve(a, 2)
        released = self.admin.release(other.hold_id, "customer left")
        self.assertEqual((released.status, released.release_reason), ("released", "customer left"))
        with self.assertRaises(ProblemError) as gone:
            self.admin.commit(other.hold_id)
        self.assertEqual((gone.exception.status, gone.exception.code), (409, "hold_released"))
        with self.assertRaises(ProblemError) as done:
            self.admin.release(hold.hold_id)
        self.assertEqual(done.exception.code, "hold_committed")

        page = self.admin.list_holds(account_id=a)
        self.assertEqual([h.hold_id for h in page.holds], [other.hold_id, hold.hold_id])  # newest first
        self.assertEqual([h.hold_id for h in self.admin.list_holds(account_id=a, status="released").holds],
                         [other.hold_id])
        self.assertEqual([h.hold_id for h in self.admin.list_holds(request_id=f"gen-{a}").holds], [hold.hold_id])
        after = self.admin.list_holds(account_id=a, limit=1, starting_after=other.hold_id)
        self.assertEqual([h.hold_id for h in after.holds], [hold.hold_id])
        with self.assertRaises(NotFoundError):
            self.admin.get_hold("hold_does_not_exist")
        self.assert_balances(a, available=7, reserved=0, used=3)

    def test_jobs(self) -> None:
        a = self.account
        job = self.admin.submit_job(a, 2, "imagegen", {"prompt": "a cat"}, client_request_id=f"job-{a}")
        self.assertEqual(self.admin.last_call.status if self.admin.last_call else 0, 202)
        self.assertEqual((job.status, job.cost, job.client_request_id), ("pending", 2, f"job-{a}"))
        ended = self.admin.get_job(f"job-{a}", wait_ms=10_000)
        self.assertEqual((ended.status, ended.charged), ("completed", True))
        self.assertIsNotNone(ended.result)
        history = self.admin.job_history(f"job-{a}")
        self.assertIn("completed", [e.kind for e in history.entries])
        self.assertEqual(self.admin.submit_job(a, 2, "imagegen", {"prompt": "a cat"},
                                               client_request_id=f"job-{a}").status, "completed")

        stuck = self.admin.submit_job(a, 3, "stuck", {"prompt": "never"})  # the client makes the id
        self.assertTrue(stuck.client_request_id.startswith("client-"))
        cancelled = self.admin.cancel_job(stuck.client_request_id)
        self.assertEqual((cancelled.status, cancelled.charged), ("cancelled", False))
        jobs = self.admin.list_jobs(account_id=a)
        self.assertEqual({j.client_request_id for j in jobs.jobs}, {f"job-{a}", stuck.client_request_id})
        self.assertEqual([j.client_request_id for j in self.admin.list_jobs(account_id=a, status="cancelled").jobs],
                         [stuck.client_request_id])
        self.assertEqual(len(self.admin.list_jobs(account_id=a, limit=1).jobs), 1)
        with self.assertRaises(InsufficientCreditsError):
            self.admin.submit_job(a, 100, "imagegen", {})
        self.assert_balances(a, available=8, reserved=0, used=2)

    def test_refunds_of_a_hold(self) -> None:
        a = self.account
        hold = self.admin.reserve(a, 4)
        self.assertEqual(hold.refunded_amount, 0)
        self.admin.commit(hold.hold_id, 3)
        self.assert_balances(a, available=7, reserved=0, used=3)

        partial = self.admin.refund_hold(hold.hold_id, amount=1, reason="jammed print", request_id=f"rf-1-{a}")
        self.assertIsInstance(partial, Hold)
        self.assertEqual((partial.status, partial.committed_amount, partial.refunded_amount), ("committed", 3, 1))
        self.assertEqual(self.admin.last_call.status if self.admin.last_call else 0, 200)
        self.assert_balances(a, available=8, reserved=0, used=2)
        again = self.admin.refund_hold(hold.hold_id, amount=1, reason="jammed print", request_id=f"rf-1-{a}")
        self.assertEqual(again.refunded_amount, 1, "the same request_id again moves nothing")
        self.assert_balances(a, available=8, reserved=0, used=2)
        with self.assertRaises(ProblemError) as mismatch:
            self.admin.refund_hold(hold.hold_id, amount=2, reason="jammed print", request_id=f"rf-1-{a}")
        self.assertEqual((mismatch.exception.status, mismatch.exception.code), (422, "idempotency_mismatch"))

        with self.assertRaises(RefundExceedsChargeError) as exceeds:
            self.admin.refund_hold(hold.hold_id, amount=3, reason="too much")
        e = exceeds.exception
        self.assertIsInstance(e, ProblemError)
        self.assertEqual((e.status, e.code, e.attempts), (409, "refund_exceeds_charge", 1))
        self.assertIn("at most 2", e.detail)
        self.assert_balances(a, available=8, reserved=0, used=2)

        rest = self.admin.refund_hold(hold.hold_id, reason="the rest")  # no amount: all that is left
        self.assertEqual(rest.refunded_amount, 3)
        self.assert_balances(a, available=10, reserved=0, used=0)
        with self.assertRaises(RefundExceedsChargeError):
            self.admin.refund_hold(hold.hold_id, reason="nothing is left")
        self.assertEqual(self.admin.get_hold(hold.hold_id).refunded_amount, 3)

        refunds = [e for e in self.admin.events(a).events if e.type == "refunded"]
        self.assertEqual([(e.amount, e.hold_id, e.reason) for e in refunds],
                         [(1, hold.hold_id, "jammed print"), (2, hold.hold_id, "the rest")])
        self.assertEqual(refunds[0].reference, f"rf-1-{a}")
        self.assertTrue((refunds[1].reference or "").startswith("client-"), "the client made the second's id")

        active = self.admin.reserve(a, 1)
        with self.assertRaises(ProblemError) as nothing_charged:
            self.admin.refund_hold(active.hold_id, reason="not charged yet")
        self.assertEqual((nothing_charged.exception.status, nothing_charged.exception.code), (409, "conflict"))
        with self.assertRaises(NotFoundError):
            self.admin.refund_hold("hold_does_not_exist", reason="no such hold")

    def test_refunds_of_a_job(self) -> None:
        a = self.account
        with self.assertRaises(NotFoundError):
            self.admin.refund_job(f"never-{a}", reason="no such job")
        self.admin.submit_job(a, 3, "imagegen", {"prompt": "a dog"}, client_request_id=f"rjob-{a}")
        self.assertEqual(self.admin.get_job(f"rjob-{a}", wait_ms=10_000).status, "completed")
        self.assert_balances(a, available=7, reserved=0, used=3)

        refunded = self.admin.refund_job(f"rjob-{a}", amount=2, reason="blurry", request_id=f"rjob-rf-{a}")
        self.assertIsInstance(refunded, Job)
        self.assertEqual((refunded.client_request_id, refunded.status, refunded.refunded_amount),
                         (f"rjob-{a}", "completed", 2))
        self.assert_balances(a, available=9, reserved=0, used=1)
        again = self.admin.refund_job(f"rjob-{a}", amount=2, reason="blurry", request_id=f"rjob-rf-{a}")
        self.assertEqual(again.refunded_amount, 2, "the same request_id again moves nothing")
        self.assert_balances(a, available=9, reserved=0, used=1)
        with self.assertRaises(RefundExceedsChargeError):
            self.admin.refund_job(f"rjob-{a}", amount=2, reason="more than is left")
        self.assertIsNone(self.admin.get_job(f"rjob-{a}").refunded_amount, "only refund_job's answer carries it")
        self.assertEqual(self.admin.get_hold(refunded.hold_id).refunded_amount, 2)
        with self.assertRaises(ProblemError) as through_holds:
            self.admin.refund_hold(refunded.hold_id, reason="a job's hold")
        self.assertEqual(through_holds.exception.code, "conflict")
        refund = [e for e in self.admin.events(a).events if e.type == "refunded"]
        self.assertEqual([(e.amount, e.job_id, e.reference) for e in refund], [(2, f"rjob-{a}", f"rjob-rf-{a}")])

        stuck = self.admin.submit_job(a, 1, "stuck", {"prompt": "never"})
        self.admin.cancel_job(stuck.client_request_id)
        with self.assertRaises(ProblemError) as not_completed:
            self.admin.refund_job(stuck.client_request_id, reason="it never ran")
        self.assertEqual((not_completed.exception.status, not_completed.exception.code), (409, "conflict"))

    def test_locks(self) -> None:
        key = f"nightly-{self.account}"
        lock = self.admin.acquire_lock(key, "w1", 60_000)
        self.assertEqual((lock.owner, lock.held, lock.fence), ("w1", True, 1))
        with self.assertRaises(ProblemError) as held:
            self.admin.acquire_lock(key, "w2", 60_000)
        self.assertEqual(held.exception.code, "lock_held")
        self.assertIsNotNone(held.exception.expires_at)
        self.assertEqual(self.admin.renew_lock(lock, 60_000).fence, 1)
        self.assertEqual(self.admin.get_lock(key).owner, "w1")
        self.assertTrue(self.admin.cancel_lock(key).cancelled)
        with self.assertRaises(ProblemError) as stop:
            self.admin.renew_lock(lock, 60_000)
        self.assertEqual(stop.exception.code, "lock_cancelled")
        again = self.admin.acquire_lock(key, "w2", 60_000)
        self.assertEqual(again.fence, 2)
        with self.assertRaises(ProblemError) as lost:
            self.admin.release_lock(lock)  # w1's fence 1: not the holder any more
        self.assertEqual(lost.exception.code, "lock_lost")
        freed = self.admin.release_lock(again)
        self.assertEqual((freed.held, freed.owner), (False, None))
        with self.assertRaises(NotFoundError):
            self.admin.get_lock(f"never-{self.account}")

    def test_idempotency_keys(self) -> None:
        key = f"charge-{self.account}"
        begun = self.admin.begin_idempotency(key, "fp-1", 60_000)
        self.assertEqual((begun.state, begun.attempt), ("started", 1))
        with self.assertRaises(ProblemError) as busy:
            self.admin.begin_idempotency(key, "fp-1", 60_000)
        self.assertEqual(busy.exception.code, "in_progress")
        with self.assertRaises(ProblemError) as other:
            self.admin.begin_idempotency(key, "fp-2", 60_000)
        self.assertEqual(other.exception.code, "idempotency_mismatch")
        finished = self.admin.finish_idempotency(key, "fp-1", {"charge": "ch_1"}, attempt=1)
        self.assertEqual((finished.state, finished.response), ("finished", {"charge": "ch_1"}))
        replay = self.admin.begin_idempotency(key, "fp-1", 60_000)
        self.assertEqual((replay.state, replay.response), ("finished", {"charge": "ch_1"}))

        spare = f"spare-{self.account}"
        self.admin.begin_idempotency(spare, "fp", 60_000)
        self.assertEqual(self.admin.abandon_idempotency(spare, "fp", attempt=1).state, "abandoned")
        self.assertEqual(self.admin.begin_idempotency(spare, "fp", 60_000).attempt, 2)

    def test_rate_limits(self) -> None:
        user = f"user-{self.account}"
        self.assertEqual(self.admin.check_ratelimit("login", user).remaining, 1)
        self.assertEqual(self.admin.check_ratelimit("login", user, cost=1).remaining, 0)
        with self.assertRaises(RateLimitedError) as limited:
            self.admin.check_ratelimit("login", user)
        self.assertEqual(limited.exception.status, 429)
        self.assertGreater(limited.exception.retry_after_ms or 0, 0)
        self.assertEqual(limited.exception.attempts, 1)
        reset = self.admin.reset_ratelimit("login", user)
        self.assertEqual((reset.policy, reset.key, reset.reset), ("login", user, True))
        self.assertTrue(self.admin.check_ratelimit("login", user).allowed)
        with self.assertRaises(NotFoundError):
            self.admin.check_ratelimit("no-such-policy", user)

    def test_a_path_segment_is_encoded_not_interpreted(self) -> None:
        # Sent as /v1/holds/..%2Faccounts%2Fx: the holds route refuses the id (no other route ran).
        with self.assertRaises(ProblemError) as caught:
            self.admin.get_hold("../accounts/x")
        self.assertEqual((caught.exception.status, caught.exception.code), (400, "invalid_request"))
        self.assertIn("hold_id", caught.exception.detail)
        # ".." is no id (a URL path cannot carry it): refused by name, whatever the route.
        with self.assertRaises(ProblemError) as caught:
            self.admin.revoke_key("..")
        self.assertEqual((caught.exception.status, caught.exception.code), (400, "invalid_request"))
        self.assertIn("key_id", caught.exception.detail)

    def test_without_a_key_only_healthz_answers(self) -> None:
        with fast_client(self.server.url, None) as anonymous:
            self.assertEqual(anonymous.healthz(), "ok")
            with self.assertRaises(ProblemError) as caught:
                anonymous.get_account(self.account)
            self.assertEqual(caught.exception.code, "unauthorized")
        with self.assertRaises(TransportError):
            fast_client("http://127.0.0.1:1", connect_timeout_ms=200).healthz()


if __name__ == "__main__":
    unittest.main()
