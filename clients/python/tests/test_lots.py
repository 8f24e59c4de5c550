"""Credit lots (api.md, Credit lots) through the client, against a real server: a credit's expires_at,
priority and category, list_lots in spending order and by status, a hold's draw (Hold.lots), and the
lot_expired event with its lot_id."""

from __future__ import annotations

import datetime
import time
import unittest

from support import ServerTestCase
from tollgate_client import Lot, LotDraw, NotFoundError, ProblemError


class LotsTest(ServerTestCase):

    def test_credits_make_lots_listed_in_spending_order_and_a_hold_keeps_its_draw(self) -> None:
        a = self.account  # its seed: 10 credits, priority 50, no expiry
        in_30_days = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=30)
        promo = self.admin.credit(a, 5, f"promo-{a}", expires_at=in_30_days, priority=10, category="promotional")
        self.assertIsNotNone(promo.event.lot_id)
        dated = self.admin.credit(a, 7, f"dated-{a}", expires_at="2099-01-31T12:00:00Z")
        again = self.admin.credit(a, 5, f"promo-{a}", priority=90)
        self.assertEqual(self.admin.last_call.status if self.admin.last_call else 0, 200)
        self.assertEqual(again.event.event_id, promo.event.event_id, "a replay answers the first credit")

        page = self.admin.list_lots(a)
        self.assertFalse(page.has_more)
        self.assertTrue(all(isinstance(lot, Lot) for lot in page.lots))
        self.assertEqual([lot.lot_id for lot in page.lots][:2], [promo.event.lot_id, dated.event.lot_id])
        first, second, seed = page.lots
        self.assertEqual((first.category, first.priority, first.amount, first.status), ("promotional", 10, 5, "active"))
        self.assertIsNotNone(first.expires_at)
        self.assertTrue((second.expires_at or "").startswith("2099-01-31T12:00:00"), second.expires_at)
        self.assertEqual((seed.category, seed.priority, seed.reference, seed.expires_at),
                         ("paid", 50, f"seed-{a}", None))

        hold = self.admin.reserve(a, 8)
        self.assertEqual(hold.lots, [LotDraw(lot_id=first.lot_id, amount=5), LotDraw(lot_id=second.lot_id, amount=3)])
        self.assertEqual(self.admin.get_hold(hold.hold_id).lots, hold.lots)
        self.admin.commit(hold.hold_id, 6)  # the first-drawn lot is used first
        lots = {lot.lot_id: lot for lot in self.admin.list_lots(a).lots}
        self.assertEqual((lots[first.lot_id].used, lots[first.lot_id].available, lots[first.lot_id].status),
                         (5, 0, "spent"))
        self.assertEqual((lots[second.lot_id].used, lots[second.lot_id].available), (1, 6))
        self.assertEqual([lot.lot_id for lot in self.admin.list_lots(a, status="spent").lots], [first.lot_id])

        one = self.admin.list_lots(a, status="active", limit=1)
        self.assertTrue(one.has_more)
        rest = self.admin.list_lots(a, status="active", starting_after=one.lots[0].lot_id)
        self.assertEqual([lot.lot_id for lot in rest.lots], [seed.lot_id])

    def test_a_lot_expires_at_once_for_readers_and_its_event_names_it(self) -> None:
        a = self.account
        soon = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=1)
        brief = self.admin.credit(a, 4, f"brief-{a}", expires_at=soon)
        time.sleep(1.3)
        expired = self.admin.list_lots(a, status="expired").lots
        self.assertEqual([(lot.lot_id, lot.expired, lot.available) for lot in expired], [(brief.event.lot_id, 4, 0)])
        account = self.admin.get_account(a)
        self.assertEqual((account.available, account.expired, account.purchased), (10, 4, 14))
        for _ in range(60):  # the reaper writes lot_expired (its interval: 1 s)
            events = [e for e in self.admin.events(a).events if e.type == "lot_expired"]
            if events:
                break
            time.sleep(0.1)
        self.assertEqual([(e.lot_id, e.amount, e.expired_after) for e in events], [(brief.event.lot_id, 4, 4)])

    def test_the_server_refuses_bad_lot_fields_and_unknown_lots(self) -> None:
        a = self.account
        with self.assertRaises(ProblemError) as past:
            self.admin.credit(a, 1, f"past-{a}", expires_at="2020-01-01T00:00:00Z")
        self.assertEqual((past.exception.status, past.exception.code), (400, "invalid_request"))
        self.assertIn("expires_at", past.exception.detail)
        with self.assertRaises(ProblemError) as cursor:
            self.admin.list_lots(a, starting_after="lot_999999")
        self.assertEqual(cursor.exception.status, 400)
        self.assertIn("starting_after", cursor.exception.detail)
        with self.assertRaises(NotFoundError):
            self.admin.list_lots(f"{a}-missing")
        self.assert_balances(a, available=10, reserved=0, used=0)


if __name__ == "__main__":
    unittest.main()
