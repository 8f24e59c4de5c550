"""Prices (api.md, Prices) through the client, against a real server: set_price and its versions,
get_price, list_prices, list_price_versions, a reservation by feature and quantity that keeps the
price it was reserved at, a commit by quantity, and check_hold, which decides without writing."""

from __future__ import annotations

import unittest

from support import ServerTestCase, fast_client
from tollgate_client import ForbiddenError, HoldCheck, NotFoundError, Price, ProblemError


class PricesTest(ServerTestCase):

    def status(self) -> int:
        return self.admin.last_call.status if self.admin.last_call else 0

    def test_a_price_is_versioned_read_and_listed(self) -> None:
        feature = f"image.{self.account}"
        first = self.admin.set_price(feature, 2)
        self.assertEqual(self.status(), 201)
        self.assertIsInstance(first, Price)
        self.assertEqual((first.feature, first.credits_per_unit, first.version), (feature, 2, 1))
        same = self.admin.set_price(feature, 2)
        self.assertEqual(self.status(), 200, "the same price again changes nothing")
        self.assertEqual(same, first)
        second = self.admin.set_price(feature, 3)
        self.assertEqual(self.status(), 201)
        self.assertEqual((second.credits_per_unit, second.version), (3, 2))
        self.assertEqual(self.admin.get_price(feature), second)

        versions = self.admin.list_price_versions(feature)
        self.assertFalse(versions.has_more)
        self.assertEqual([(p.version, p.credits_per_unit) for p in versions.versions], [(2, 3), (1, 2)])
        self.assertEqual(versions.versions[1].updated_at, first.updated_at, "each version: when it was set")
        newest = self.admin.list_price_versions(feature, limit=1)
        self.assertTrue(newest.has_more)
        older = self.admin.list_price_versions(feature, starting_after=newest.versions[0].version)
        self.assertEqual([p.version for p in older.versions], [1])

        other = f"text.{self.account}"
        self.admin.set_price(other, 1)
        listed = self.admin.list_prices(limit=1000)
        features = [p.feature for p in listed.prices]
        self.assertEqual(features, sorted(features), "by feature ascending")
        self.assertIn(feature, features)
        self.assertEqual(listed.prices[features.index(feature)], second, "the current price")
        after = self.admin.list_prices(limit=1, starting_after=feature)
        self.assertEqual(len(after.prices), 1)
        self.assertGreater(after.prices[0].feature, feature)

        with self.assertRaises(NotFoundError):
            self.admin.get_price(f"none.{self.account}")
        with self.assertRaises(NotFoundError):
            self.admin.list_price_versions(f"none.{self.account}")
        with self.assertRaises(ProblemError) as cursor:
            self.admin.list_prices(starting_after=f"none.{self.account}")
        self.assertEqual((cursor.exception.status, cursor.exception.code), (400, "invalid_request"))
        self.assertIn("starting_after", cursor.exception.detail)

    def test_an_admin_read_key_reads_prices_and_cannot_set_one(self) -> None:
        feature = f"image.{self.account}"
        self.admin.set_price(feature, 4)
        reader = self.admin.create_admin_key("admin:read")
        with fast_client(self.server.url, reader.secret) as c:
            self.assertEqual(c.get_price(feature).credits_per_unit, 4)
            with self.assertRaises(ForbiddenError) as forbidden:
                c.set_price(feature, 5)
            self.assertEqual(forbidden.exception.missing_scope, "admin")
        kiosk = self.admin.create_key(self.account, scopes=["holds:write", "read"])
        with fast_client(self.server.url, kiosk.secret) as c:
            with self.assertRaises(ForbiddenError):
                c.list_prices()
        self.assertEqual(self.admin.get_price(feature).version, 1)

    def test_a_hold_by_feature_keeps_its_price_and_commits_by_quantity(self) -> None:
        a = self.account
        feature = f"image.{a}"
        self.admin.set_price(feature, 2)
        request_id = self.admin.new_request_id()
        hold = self.admin.reserve(a, feature=feature, quantity=3, request_id=request_id)
        self.assertEqual(self.status(), 201)
        self.assertEqual((hold.amount, hold.feature, hold.quantity, hold.unit_price, hold.price_version),
                         (6, feature, 3, 2, 1))
        self.assert_balances(a, available=4, reserved=6, used=0)

        self.admin.set_price(feature, 5)  # holds already made keep their price
        self.assertEqual(self.admin.get_hold(hold.hold_id).unit_price, 2)
        listed = self.admin.list_holds(account_id=a).holds
        self.assertEqual([(h.hold_id, h.unit_price) for h in listed], [(hold.hold_id, 2)])
        again = self.admin.reserve(a, feature=feature, quantity=3, request_id=request_id)
        self.assertEqual(self.status(), 200, "the same request_id: that hold, at its price")
        self.assertEqual((again.hold_id, again.amount, again.unit_price), (hold.hold_id, 6, 2))
        with self.assertRaises(ProblemError) as mismatch:
            self.admin.reserve(a, feature=feature, quantity=4, request_id=request_id)
        self.assertEqual((mismatch.exception.status, mismatch.exception.code), (422, "idempotency_mismatch"))

        with self.assertRaises(ProblemError) as over:
            self.admin.commit(hold.hold_id, quantity=4)  # 8 credits of a hold of 6
        self.assertEqual((over.exception.status, over.exception.code), (400, "invalid_request"))
        committed = self.admin.commit(hold.hold_id, quantity=2)
        self.assertEqual((committed.status, committed.committed_amount, committed.unit_price), ("committed", 4, 2))
        self.assert_balances(a, available=6, reserved=0, used=4)

        one = self.admin.reserve(a, feature=feature)  # quantity 1, at the price now
        self.assertEqual((one.amount, one.quantity, one.unit_price, one.price_version), (5, 1, 5, 2))
        self.admin.commit(one.hold_id, 1)  # a hold by feature may be committed by amount
        read = self.admin.get_hold(one.hold_id)
        self.assertEqual((read.committed_amount, read.feature, read.unit_price), (1, feature, 5))
        with self.admin.hold(a, feature=feature) as h:
            self.assertEqual((h.hold.amount, h.hold.quantity), (5, 1))
        self.assertEqual(h.hold.status, "committed", "leaving the block commits the whole hold")
        self.assert_balances(a, available=0, reserved=0, used=10)

    def test_refusals_of_a_reservation_by_feature(self) -> None:
        a = self.account
        feature = f"image.{a}"
        self.admin.set_price(feature, 2)
        with self.assertRaises(ProblemError) as unknown:
            self.admin.reserve(a, feature=f"none.{a}")
        self.assertEqual((unknown.exception.status, unknown.exception.code), (400, "invalid_request"))
        self.assertIn(f'unknown feature "none.{a}"', unknown.exception.detail)
        self.assertIn("known features", unknown.exception.detail)
        with self.assertRaises(ProblemError) as too_many:
            self.admin.reserve(a, feature=feature, quantity=2**52)  # 2^53 credits: past the limit
        self.assertEqual(too_many.exception.status, 400)
        hold = self.admin.reserve(a, 2)
        self.assertIsNone(hold.feature)
        with self.assertRaises(ProblemError) as by_amount:
            self.admin.commit(hold.hold_id, quantity=1)
        self.assertEqual((by_amount.exception.status, by_amount.exception.code), (400, "invalid_request"))
        self.admin.release(hold.hold_id)
        self.assert_balances(a, available=10, reserved=0, used=0)

    def test_check_hold_decides_without_writing(self) -> None:
        a = self.account
        feature = f"image.{a}"
        self.admin.set_price(feature, 3)
        events = len(self.admin.events(a).events)

        yes = self.admin.check_hold(a, 4)
        self.assertIsInstance(yes, HoldCheck)
        self.assertEqual((yes.allowed, yes.account_id, yes.available, yes.requested, yes.reason, yes.feature),
                         (True, a, 10, 4, None, None))
        no = self.admin.check_hold(a, feature=feature, quantity=4)
        self.assertEqual((no.allowed, no.requested, no.feature, no.quantity, no.unit_price, no.reason),
                         (False, 12, feature, 4, 3, "insufficient_credits"))
        self.assertEqual(no.detail, "Not enough credits: 10 available, 12 needed.")
        self.assertEqual(self.admin.check_hold(a, feature=feature).requested, 3)

        self.assert_balances(a, available=10, reserved=0, used=0)
        self.assertEqual(self.holds_of(a), 0)
        self.assertEqual(len(self.admin.events(a).events), events, "a check writes no event")

        self.admin.update_account(a, frozen=True)
        frozen = self.admin.check_hold(a, 1)
        self.assertEqual((frozen.allowed, frozen.reason), (False, "account_frozen"))
        self.admin.update_account(a, frozen=False)

        with self.assertRaises(ProblemError) as unknown:
            self.admin.check_hold(a, feature=f"none.{a}")
        self.assertEqual(unknown.exception.status, 400)
        with self.assertRaises(NotFoundError):
            self.admin.check_hold(f"{a}-missing", 1)
        kiosk = self.admin.create_key(a, scopes=["holds:write", "read"])
        with fast_client(self.server.url, kiosk.secret) as c:
            self.assertTrue(c.check_hold(a, 10).allowed)
            with self.assertRaises(NotFoundError):
                c.check_hold(self.other_account(), 1)  # another account: as if it did not exist
        writer = self.admin.create_key(a, scopes=["holds:write"])
        with fast_client(self.server.url, writer.secret) as c:
            self.assertTrue(c.check_hold(a, 1).allowed)  # the check is a reservation's question
        reader = self.admin.create_key(a, scopes=["read"])
        with fast_client(self.server.url, reader.secret) as c:
            with self.assertRaises(ForbiddenError) as forbidden:
                c.check_hold(a, 1)
            self.assertEqual(forbidden.exception.missing_scope, "holds:write")

    def other_account(self) -> str:
        other = f"{self.account}-other"
        self.admin.create_account(other)
        return other


if __name__ == "__main__":
    unittest.main()
