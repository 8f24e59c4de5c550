"""Bad arguments are refused before any request (S10 of clients/testing/scenarios.md): each raises
InvalidArgumentError, the proxy in front of the server sees no request, the balances do not move."""

from __future__ import annotations

import datetime
import unittest
from collections.abc import Callable
from typing import Any

from support import ServerTestCase, fast_client
from tollgate_client import Client, InvalidArgumentError, Lock, RetryPolicy


class ArgumentsTest(ServerTestCase):

    def test_s10_bad_arguments_are_refused_before_any_request(self) -> None:
        proxy = self.proxy()
        c = fast_client(proxy.url)
        self.addCleanup(c.close)
        a = self.account
        too_long = "x" * 129
        calls: list[tuple[str, Callable[[], Any]]] = [
            ("amount 0", lambda: c.reserve(a, 0)),
            ("amount -1", lambda: c.reserve(a, -1)),
            ("amount 1.5", lambda: c.reserve(a, 1.5)),  # type: ignore[arg-type]
            ("amount '3'", lambda: c.reserve(a, "3")),  # type: ignore[arg-type]
            ("amount True", lambda: c.reserve(a, True)),
            ("amount 2^53", lambda: c.credit(a, 2**53, "r-big")),
            ("account id with a space", lambda: c.reserve("kiosk 1", 1)),
            ("empty account id", lambda: c.get_account("")),
            ("account id of 129 characters", lambda: c.create_account(too_long)),
            ("request id with a slash", lambda: c.reserve(a, 1, request_id="a/b")),
            ("reference missing", lambda: c.credit(a, 1, None)),  # type: ignore[arg-type]
            ("ttl_ms 0", lambda: c.reserve(a, 1, ttl_ms=0)),
            ("metadata not a dict", lambda: c.reserve(a, 1, metadata=[1])),  # type: ignore[arg-type]
            ("metadata not JSON", lambda: c.reserve(a, 1, metadata={"x": object()})),
            ("commit amount 0", lambda: c.commit("hold_1", 0)),
            ("empty hold id", lambda: c.commit("")),
            ("reason too long", lambda: c.release("hold_1", "r" * 1025)),
            ("limit 0", lambda: c.list_holds(limit=0)),
            ("limit 1001", lambda: c.list_accounts(limit=1001)),
            ("unknown hold status", lambda: c.list_holds(status="open")),
            ("wait_ms above a minute", lambda: c.feed(wait_ms=60_001)),
            ("frozen not a bool", lambda: c.update_account(a, frozen=1)),  # type: ignore[arg-type]
            ("overdraft below 0", lambda: c.update_account(a, overdraft_limit=-1)),
            ("lock ttl above a day", lambda: c.acquire_lock("k", "w1", 86_400_001)),
            ("lock without an owner", lambda: c.release_lock(Lock(key="k", fence=1, held=False, cancelled=False))),
            ("empty fingerprint", lambda: c.begin_idempotency("k", "", 1000)),
            ("finish with null", lambda: c.finish_idempotency("k", "fp", None)),
            ("ratelimit cost 0", lambda: c.check_ratelimit("login", "u1", cost=0)),
            ("job cost 0", lambda: c.submit_job(a, 0, "imagegen", {})),
            ("hold context amount 0", lambda: c.hold(a, 0)),
            ("refund amount 0", lambda: c.refund_hold("hold_1", amount=0, reason="r")),
            ("refund amount 1.5", lambda: c.refund_job("job-1", amount=1.5, reason="r")),  # type: ignore[arg-type]
            ("refund without a reason", lambda: c.refund_hold("hold_1", reason="")),
            ("refund reason not a string", lambda: c.refund_hold("hold_1", reason=None)),  # type: ignore[arg-type]
            ("refund reason too long", lambda: c.refund_job("job-1", reason="r" * 1025)),
            ("refund request id with a space", lambda: c.refund_hold("hold_1", reason="r", request_id="a b")),
            ("refund of an empty hold id", lambda: c.refund_hold("", reason="r")),
            ("refund of a job id with a slash", lambda: c.refund_job("a/b", reason="r")),
            ("key scope unknown", lambda: c.create_key(a, scopes=["hold:write"])),
            ("key scopes empty", lambda: c.create_key(a, scopes=[])),
            ("key scopes a string", lambda: c.create_key(a, scopes="read")),  # type: ignore[arg-type]
            ("key scope twice", lambda: c.create_key(a, scopes=["read", "read"])),
            ("account key asking for admin", lambda: c.create_key(a, scopes=["admin"])),
            ("admin key asking for read", lambda: c.create_admin_key("read")),
            ("key expiry not RFC 3339", lambda: c.create_key(a, expires_at="tomorrow")),
            ("key expiry a naive datetime", lambda: c.create_key(a, expires_at=datetime.datetime(2030, 1, 1))),
            ("key name empty", lambda: c.create_key(a, name="")),
            ("key name of 101 bytes", lambda: c.create_admin_key("admin:read", name="n" * 101)),
            ("lot priority 101", lambda: c.credit(a, 1, "r-lot", priority=101)),
            ("lot priority -1", lambda: c.credit(a, 1, "r-lot", priority=-1)),
            ("lot priority True", lambda: c.credit(a, 1, "r-lot", priority=True)),
            ("lot category unknown", lambda: c.credit(a, 1, "r-lot", category="gift")),
            ("lot expiry not RFC 3339", lambda: c.credit(a, 1, "r-lot", expires_at="next week")),
            ("lot expiry a naive datetime", lambda: c.credit(a, 1, "r-lot", expires_at=datetime.datetime(2030, 1, 1))),
            ("lots of a bad account id", lambda: c.list_lots("a b")),
            ("unknown lot status", lambda: c.list_lots(a, status="open")),
            ("lots limit 0", lambda: c.list_lots(a, limit=0)),
            ("lots starting after a bad id", lambda: c.list_lots(a, starting_after="lot 1")),
            ("reserve by amount and feature", lambda: c.reserve(a, 1, feature="image.gen")),
            ("reserve by neither", lambda: c.reserve(a)),
            ("reserve quantity without feature", lambda: c.reserve(a, 1, quantity=2)),
            ("reserve feature with a space", lambda: c.reserve(a, feature="image gen")),
            ("reserve quantity 0", lambda: c.reserve(a, feature="image.gen", quantity=0)),
            ("reserve quantity 2^53", lambda: c.reserve(a, feature="image.gen", quantity=2**53)),
            ("hold context by amount and feature", lambda: c.hold(a, 1, feature="image.gen")),
            ("commit amount and quantity", lambda: c.commit("hold_1", 1, quantity=1)),
            ("commit quantity 0", lambda: c.commit("hold_1", quantity=0)),
            ("commit quantity 1.5", lambda: c.commit("hold_1", quantity=1.5)),  # type: ignore[arg-type]
            ("check by amount and feature", lambda: c.check_hold(a, 1, feature="image.gen")),
            ("check by neither", lambda: c.check_hold(a)),
            ("check quantity without feature", lambda: c.check_hold(a, 1, quantity=1)),
            ("check of a bad account id", lambda: c.check_hold("a b", 1)),
            ("price 0", lambda: c.set_price("image.gen", 0)),
            ("price 2^53", lambda: c.set_price("image.gen", 2**53)),
            ("price '3'", lambda: c.set_price("image.gen", "3")),  # type: ignore[arg-type]
            ("price of a bad feature", lambda: c.set_price("image/gen", 1)),
            ("price of an empty feature", lambda: c.get_price("")),
            ("prices limit 0", lambda: c.list_prices(limit=0)),
            ("prices starting after a bad feature", lambda: c.list_prices(starting_after="a b")),
            ("versions starting after 0", lambda: c.list_price_versions("image.gen", starting_after=0)),
            ("versions starting after a string", lambda: c.list_price_versions("image.gen", starting_after="2")),  # type: ignore[arg-type]
        ]
        for name, call in calls:
            with self.subTest(name):
                with self.assertRaises(InvalidArgumentError) as caught:
                    call()
                self.assertEqual((caught.exception.code, caught.exception.status, caught.exception.attempts),
                                 ("invalid_argument", 0, 0))
                self.assertIsInstance(caught.exception, ValueError)
        self.assertEqual(proxy.requests(), [], "nothing may be sent for a bad argument")
        self.assertIsNone(c.last_call)
        self.assert_balances(a, available=10, reserved=0, used=0)
        # The same client still works (and the proxy does see a good call).
        self.assertEqual(c.reserve(a, 1).amount, 1)
        self.assertEqual(len(proxy.requests()), 1)

    def test_bad_client_options_are_refused_at_construction(self) -> None:
        for url in ("127.0.0.1:8080", "http://127.0.0.1:8080/v1",
                    "http://user:pw@127.0.0.1:8080", "http://127.0.0.1:8080/?x=1", "ftp://h:1",
                    "http://127.0.0.1:99999", "http://127.0.0.1:0", "http://:80"):
            with self.subTest(url):
                with self.assertRaises(InvalidArgumentError) as caught:
                    Client(url)
                self.assertEqual(caught.exception.argument, "base_url")
        for url in ("http://127.0.0.1:8080", "http://127.0.0.1:8080/", "http://localhost:1", "http://[::1]:80",
                    "https://127.0.0.1:8443", "https://localhost"):
            Client(url).close()
        bad_options: list[dict[str, Any]] = [{"retry": RetryPolicy(attempts_max=0)}, {"request_timeout_ms": 0},
                                             {"request_id_prefix": "bad prefix"}, {"key": "two\nlines"}]
        for options in bad_options:
            with self.subTest(str(options)):
                with self.assertRaises(InvalidArgumentError):
                    Client("http://127.0.0.1:1", **options)


if __name__ == "__main__":
    unittest.main()
