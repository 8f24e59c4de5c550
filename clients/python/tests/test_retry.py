"""The retry policy against a real server, through the lossy proxy where a fault is needed:
the scenarios S1-S7, S11 and S12-S14 of clients/testing/scenarios.md, each checked on the server's
state."""

from __future__ import annotations

import json
import time
import unittest

from support import ADMIN_KEY, RecordingSleep, ServerTestCase, fast_client, unused_port
from tollgate_client import (CallInfo, Client, InsufficientCreditsError, InvalidArgumentError, ProblemError, RetryPolicy, TransportError,
                             UnavailableError)


def assert_jittered(test: unittest.TestCase, waits_s: list[float], backoffs_ms: list[int]) -> None:
    """Each wait is between half and all of its back-off (the jitter)."""
    test.assertEqual(len(waits_s), len(backoffs_ms), waits_s)
    for wait_s, backoff_ms in zip(waits_s, backoffs_ms):
        test.assertGreaterEqual(wait_s * 1000, backoff_ms / 2 - 1e-6, waits_s)
        test.assertLessEqual(wait_s * 1000, backoff_ms + 1e-6, waits_s)


class RetryTest(ServerTestCase):

    def test_s1_lost_answer_reserve_is_resent_with_its_request_id_and_reserves_once(self) -> None:
        proxy = self.proxy("--drop-first-responses", "1")  # the server reserves; the client never hears
        with fast_client(proxy.url) as c:
            hold = c.reserve(self.account, 3)  # no request_id: the client makes one, once
            self.assertEqual(c.last_call, CallInfo(status=200, attempts=2),
                             "the second attempt must find the first one's hold")
        sent = proxy.requests()
        self.assertEqual([r["fault"] for r in sent], ["drop", "none"])
        self.assertEqual(sent[0]["body"], sent[1]["body"])  # the very same bytes
        self.assertEqual(json.loads(sent[0]["body"])["request_id"], hold.request_id)
        self.assertTrue(hold.request_id.startswith("client-"))
        self.assertEqual(self.holds_of(self.account), 1)
        self.assert_balances(self.account, available=7, reserved=3, used=0)

    def test_s1_lost_answer_refund_is_resent_with_its_request_id_and_refunds_once(self) -> None:
        hold = self.admin.commit(self.admin.reserve(self.account, 5).hold_id)
        proxy = self.proxy("--drop-first-responses", "1")  # the server refunds; the client never hears
        with fast_client(proxy.url) as c:
            refunded = c.refund_hold(hold.hold_id, amount=2, reason="lost answer")  # the client makes the id, once
            self.assertEqual(c.last_call, CallInfo(status=200, attempts=2))
        sent = proxy.requests()
        self.assertEqual([r["fault"] for r in sent], ["drop", "none"])
        self.assertEqual(sent[0]["body"], sent[1]["body"])  # the very same bytes
        self.assertTrue(json.loads(sent[0]["body"])["request_id"].startswith("client-"))
        self.assertEqual(refunded.refunded_amount, 2)
        refunds = [e for e in self.admin.events(self.account).events if e.type == "refunded"]
        self.assertEqual([(e.amount, e.reference) for e in refunds], [(2, json.loads(sent[0]["body"])["request_id"])])
        self.assert_balances(self.account, available=7, reserved=0, used=3)

    def test_s1_lost_answer_reserve_by_feature_is_resent_and_reserves_once_at_its_price(self) -> None:
        feature = f"image.{self.account}"
        self.admin.set_price(feature, 2)
        proxy = self.proxy("--drop-first-responses", "1")  # the server reserves; the client never hears
        with fast_client(proxy.url) as c:
            hold = c.reserve(self.account, feature=feature, quantity=2)  # the client makes the id, once
            self.assertEqual(c.last_call, CallInfo(status=200, attempts=2))
        sent = proxy.requests()
        self.assertEqual([r["fault"] for r in sent], ["drop", "none"])
        self.assertEqual(sent[0]["body"], sent[1]["body"])  # the very same bytes
        self.assertEqual((hold.amount, hold.quantity, hold.unit_price), (4, 2, 2))
        self.assertEqual(self.holds_of(self.account), 1)
        self.assert_balances(self.account, available=6, reserved=4, used=0)

    def test_s1_lost_answer_set_price_is_resent_and_makes_one_version(self) -> None:
        feature = f"image.{self.account}"
        proxy = self.proxy("--drop-first-responses", "1")  # the server sets it; the client never hears
        with fast_client(proxy.url) as c:
            price = c.set_price(feature, 7)
            self.assertEqual(c.last_call, CallInfo(status=200, attempts=2), "the resend found the same price")
        sent = proxy.requests()
        self.assertEqual([(r["method"], r["fault"]) for r in sent], [("PUT", "drop"), ("PUT", "none")])
        self.assertEqual(sent[0]["body"], sent[1]["body"])
        self.assertEqual((price.credits_per_unit, price.version), (7, 1))
        self.assertEqual([p.version for p in self.admin.list_price_versions(feature).versions], [1])

    def test_s2_reset_before_the_server_saw_it_is_resent_and_reserves_once(self) -> None:
        proxy = self.proxy("--reset-first-requests", "1")
        with fast_client(proxy.url) as c:
            hold = c.reserve(self.account, 3, request_id="r-reset")
            self.assertEqual(c.last_call, CallInfo(status=201, attempts=2))
        sent = proxy.requests()
        self.assertEqual([r["fault"] for r in sent], ["reset", "none"])
        self.assertEqual(sent[0]["body"], sent[1]["body"])
        self.assertEqual(hold.request_id, "r-reset")
        self.assertEqual(self.holds_of(self.account), 1)
        self.assert_balances(self.account, available=7, reserved=3, used=0)

    def test_s3_timed_out_reserve_is_resent_with_the_same_id_and_finds_its_hold(self) -> None:
        proxy = self.proxy("--delay-ms", "1500", "--delay-first-responses", "1")
        with fast_client(proxy.url, request_timeout_ms=300) as c:
            hold = c.reserve(self.account, 2, request_id="r-slow")
            self.assertEqual(c.last_call, CallInfo(status=200, attempts=2))
        sent = proxy.requests()
        self.assertEqual(len(sent), 2)
        self.assertEqual(sent[0]["body"], sent[1]["body"])
        looked_up = self.admin.list_holds(request_id="r-slow").holds
        self.assertEqual([h.hold_id for h in looked_up], [hold.hold_id])
        self.assertEqual(self.holds_of(self.account), 1)
        self.assert_balances(self.account, available=8, reserved=2, used=0)

    def test_s4_insufficient_credits_is_asked_exactly_once_more_at_once(self) -> None:
        sleep = RecordingSleep()
        with fast_client(self.server.url, sleep=sleep) as c:
            with self.assertRaises(InsufficientCreditsError) as caught:
                c.reserve(self.account, 11, request_id="too-much")
            e = caught.exception
            self.assertEqual((e.status, e.code, e.available, e.requested, e.attempts), (409, "insufficient_credits",
                                                                                        10, 11, 2))
            self.assertEqual(e.detail, "Not enough credits: 10 available, 11 needed.")
            self.assertEqual(str(e), "insufficient_credits: Not enough credits: 10 available, 11 needed. "
                                     "(available 10, requested 11)")
            self.assertEqual(sleep.waits, [], "no back-off: credits do not come back by waiting")
            # Other calls are never asked again on a 409.
            with self.assertRaises(InsufficientCreditsError) as debit:
                c.debit(self.account, 11, "d-1", "refund")
            self.assertEqual(debit.exception.attempts, 1)
        with fast_client(self.server.url, retry=RetryPolicy(retry_insufficient_credits_once=False)) as once:
            with self.assertRaises(InsufficientCreditsError) as caught_once:
                once.reserve(self.account, 11, request_id="too-much")
        self.assertEqual(caught_once.exception.attempts, 1)
        self.assertEqual(self.holds_of(self.account), 0)
        self.assert_balances(self.account, available=10, reserved=0, used=0)

    def test_s4_an_empty_account_gets_the_kiosk_message(self) -> None:
        self.admin.debit(self.account, 10, f"empty-{self.account}", "test")
        with self.assertRaises(InsufficientCreditsError) as caught:
            self.admin.reserve(self.account, 1)
        self.assertEqual(caught.exception.detail,
                         "No credits available. Another device may be using this account right now.")

    def test_s5_503_retry_after_is_honoured_with_the_same_body(self) -> None:
        proxy = self.proxy("--answer-503-first", "1", "--retry-after-s", "1")
        sleep = RecordingSleep()
        retry = RetryPolicy(attempts_max=4, backoff_initial_ms=20, backoff_max_ms=2000)
        with fast_client(proxy.url, retry=retry, sleep=sleep) as c:
            started = time.monotonic()
            transfer = c.credit(self.account, 5, "buy-503")
            took_s = time.monotonic() - started
            self.assertEqual(c.last_call, CallInfo(status=201, attempts=2))
        self.assertEqual(sleep.waits, [1.0], "Retry-After: 1 raised the 20 ms back-off to 1 s")
        self.assertGreaterEqual(took_s, 1.0)
        sent = proxy.requests()
        self.assertEqual([r["fault"] for r in sent], ["503", "none"])
        self.assertEqual(sent[0]["body"], sent[1]["body"])
        self.assertEqual(transfer.account.available, 15)
        credited = [e for e in self.admin.events(self.account).events if e.reference == "buy-503"]
        self.assertEqual([(e.type, e.amount) for e in credited], [("credited", 5)])
        self.assert_balances(self.account, available=15, reserved=0, used=0)

    def test_s5_a_retry_after_beyond_the_budget_is_reported_at_once(self) -> None:
        proxy = self.proxy("--answer-503-first", "1", "--retry-after-s", "30")
        sleep = RecordingSleep()
        with fast_client(proxy.url, sleep=sleep) as c:
            with self.assertRaises(UnavailableError) as caught:
                c.get_account(self.account)  # 30 s asked, 10 s of budget: waiting would be in vain
            self.assertEqual(c.last_call, CallInfo(status=503, attempts=1))
        self.assertEqual(caught.exception.retry_after_ms, 30_000)
        self.assertEqual(sleep.waits, [])

    def test_s6_503_is_given_up_after_attempts_max_with_doubling_waits(self) -> None:
        proxy = self.proxy("--answer-503-first", "4", "--retry-after-s", "0")
        sleep = RecordingSleep()
        with fast_client(proxy.url, sleep=sleep) as c:
            with self.assertRaises(UnavailableError) as caught:
                c.get_account(self.account)
        e = caught.exception
        self.assertEqual((e.status, e.code, e.attempts), (503, "unavailable", 4))
        assert_jittered(self, sleep.waits, [20, 40, 80])
        self.assertEqual(len(proxy.requests()), 4)

    def test_s7_create_key_is_not_resent_once_it_may_have_arrived(self) -> None:
        proxy = self.proxy("--answer-503-first", "1", "--drop-first-responses", "1")
        with fast_client(proxy.url) as c:
            with self.assertRaises(UnavailableError) as refused:
                c.create_key(self.account)
            self.assertEqual(refused.exception.attempts, 1)
            with self.assertRaises(TransportError) as lost:
                c.create_key(self.account)  # the server made it; the answer is lost
            self.assertEqual((lost.exception.code, lost.exception.attempts), ("connection_lost", 1))
        self.assertEqual([r["fault"] for r in proxy.requests()], ["503", "drop"])
        self.assertEqual(len(self.admin.list_keys(account_id=self.account).keys), 1)

    def test_s7_begin_idempotency_is_not_resent_after_a_lost_answer(self) -> None:
        proxy = self.proxy("--drop-first-responses", "1")
        with fast_client(proxy.url) as c:
            with self.assertRaises(TransportError) as lost:
                c.begin_idempotency(f"charge-{self.account}", "fp", 60_000)
            self.assertEqual(lost.exception.attempts, 1)
        with self.assertRaises(ProblemError) as again:
            self.admin.begin_idempotency(f"charge-{self.account}", "fp", 60_000)
        self.assertEqual(again.exception.code, "in_progress")  # the lost attempt's claim is there
        self.assertEqual(len(proxy.requests()), 1)

    def test_a_server_that_never_answers_times_out_after_bounded_attempts(self) -> None:
        proxy = self.proxy("--delay-ms", "5000")
        retry = RetryPolicy(attempts_max=3, backoff_initial_ms=20, backoff_max_ms=100)
        with fast_client(proxy.url, request_timeout_ms=200, retry=retry) as c:
            started = time.monotonic()
            with self.assertRaises(TransportError) as caught:
                c.commit("hold_1_x")
            took_s = time.monotonic() - started
        self.assertEqual((caught.exception.code, caught.exception.attempts), ("timeout", 3))
        self.assertGreaterEqual(took_s, 0.6)
        self.assertEqual(len(proxy.requests()), 3)

    def test_s11_nothing_listening_gives_up_after_attempts_max(self) -> None:
        sleep = RecordingSleep()
        with fast_client(f"http://127.0.0.1:{unused_port()}", "k", sleep=sleep) as c:
            with self.assertRaises(TransportError) as caught:
                c.create_key("acct")  # even create_key: a refused connect certainly sent nothing
        self.assertEqual((caught.exception.code, caught.exception.status, caught.exception.attempts),
                         ("connect", 0, 4))
        assert_jittered(self, sleep.waits, [20, 40, 80])


class BalancerTest(ServerTestCase):
    """S12-S14: a balancer in front of two instances that restart one after the other — for 1.5 s it
    drops answers, resets connections and answers 502/503/504 itself (lossy_proxy --outage-ms)."""

    def test_s12_reserve_with_a_request_id_rides_out_a_rolling_restart_and_charges_once(self) -> None:
        proxy = self.proxy("--outage-ms", "1500")  # drop, 502, reset, 504, 503, drop, ... for 1.5 s
        with Client(proxy.url, ADMIN_KEY) as c:  # the default policy: a 10 s budget
            started = time.monotonic()
            hold = c.reserve(self.account, 3, request_id=f"click-{self.account}")
            took_s = time.monotonic() - started
            reserved = c.last_call
            committed = c.commit(hold.hold_id, 2)
        assert reserved is not None
        self.assertEqual(reserved.status, 200, "the first attempt (its answer dropped) made the hold")
        self.assertGreaterEqual(reserved.attempts, 4)
        self.assertGreaterEqual(took_s, 1.5)
        sent = [r for r in proxy.requests() if r["target"] == "/v1/holds"]
        self.assertEqual(len(sent), reserved.attempts)
        self.assertEqual(len({r["body"] for r in sent}), 1, "every attempt sends the same bytes")
        faults = [r["fault"] for r in sent]
        self.assertEqual(faults[:3], ["outage-drop", "outage-502", "outage-reset"])
        self.assertEqual(faults[-1], "none")
        self.assertEqual((committed.status, committed.committed_amount), ("committed", 2))
        self.assertEqual(self.holds_of(self.account), 1)
        self.assert_balances(self.account, available=8, reserved=0, used=2)
        reserved_events = [e for e in self.admin.events(self.account).events if e.type == "reserved"]
        self.assertEqual(len(reserved_events), 1, "reserved once")

    def test_s13_a_call_without_an_id_is_not_resent_once_it_may_have_reached_the_server(self) -> None:
        hold = self.admin.reserve(self.account, 1, ttl_ms=60_000)
        dropped = self.proxy("--outage-ms", "600000", "--outage-faults", "drop")
        with fast_client(dropped.url) as c:
            with self.assertRaises(TransportError) as lost:
                c.extend(hold.hold_id, 600_000)  # reaches the server; its answer is lost
        self.assertEqual((lost.exception.code, lost.exception.attempts), ("connection_lost", 1))
        self.assertEqual(len(dropped.requests()), 1)
        self.assertGreater(self.admin.get_hold(hold.hold_id).expires_at, hold.expires_at, "the one send acted")
        for status in ("502", "503", "504"):
            answered = self.proxy("--outage-ms", "600000", "--outage-faults", status)
            with fast_client(answered.url) as c:
                with self.assertRaises(UnavailableError) as refused:
                    c.extend(hold.hold_id, 600_000)
            self.assertEqual((refused.exception.status, refused.exception.code, refused.exception.attempts),
                             (int(status), f"http_{status}", 1))
            self.assertEqual(len(answered.requests()), 1)
        # Never reached the server (nothing listens): sent again.
        with fast_client(f"http://127.0.0.1:{unused_port()}") as c:
            with self.assertRaises(TransportError) as refused_connect:
                c.extend(hold.hold_id, 600_000)
        self.assertEqual((refused_connect.exception.code, refused_connect.exception.attempts), ("connect", 4))

    def test_s14_the_budget_bounds_a_call_and_can_be_set_per_call(self) -> None:
        proxy = self.proxy("--outage-ms", "600000", "--outage-faults", "502")
        retry = RetryPolicy(budget_ms=1000, backoff_initial_ms=50, backoff_max_ms=200)
        with fast_client(proxy.url, retry=retry) as c:
            started = time.monotonic()
            with self.assertRaises(UnavailableError) as caught:
                c.get_account(self.account)
            took_s = time.monotonic() - started
            self.assertGreater(caught.exception.attempts, 3)
            self.assertLess(took_s, 1.0 + 0.5, "no wait ends after the budget (plus the last attempt)")
            self.assertGreater(took_s, 0.5)
            quick = c.with_retry(budget_ms=0)  # this call only: no retry at all
            with self.assertRaises(UnavailableError) as once:
                quick.get_account(self.account)
            self.assertEqual(once.exception.attempts, 1)
            self.assertEqual(c.retry.budget_ms, 1000, "the client's own policy is unchanged")
            with self.assertRaises(InvalidArgumentError):
                c.with_retry(budget_ms=-1)

    def test_the_default_policy_is_a_10_s_budget(self) -> None:
        self.assertEqual(RetryPolicy(), RetryPolicy(budget_ms=10_000, attempts_max=20, backoff_initial_ms=100,
                                                    backoff_max_ms=2000, retry_insufficient_credits_once=True))


class StaleConnectionTest(ServerTestCase):

    def test_a_connection_closed_by_the_server_is_replaced_without_counting_an_attempt(self) -> None:
        sleep = RecordingSleep()
        with fast_client(self.server.url, ADMIN_KEY, sleep=sleep) as c:
            self.assertEqual(c.healthz(), "ok")
            self.server.restart()  # a graceful stop closes the idle kept-alive connection
            self.assertEqual(c.get_account(self.account).available, 10)
            self.assertEqual(c.last_call, CallInfo(status=200, attempts=1))
        self.assertEqual(sleep.waits, [])


if __name__ == "__main__":
    unittest.main()
