"""``with client.hold(...) as h``: scenarios S8 and S9 of clients/testing/scenarios.md, and the
other ways out of the block, each checked on the server's state."""

from __future__ import annotations

import unittest

from support import ServerTestCase, fast_client
from tollgate_client import InsufficientCreditsError, ProblemError


class Boom(Exception):
    pass


class HoldContextTest(ServerTestCase):

    def test_s8_an_exception_in_the_block_releases_the_hold_and_goes_on(self) -> None:
        with self.assertRaises(Boom):
            with self.admin.hold(self.account, 3, request_id=f"ctx-1-{self.account}") as h:
                self.assert_balances(self.account, available=7, reserved=3, used=0)
                raise Boom("the paid call failed")
        hold = self.admin.get_hold(h.hold_id)
        self.assertEqual((hold.status, hold.request_id), ("released", f"ctx-1-{self.account}"))
        self.assertEqual(hold.release_reason, "Boom in the hold's with block: the paid call failed")
        self.assert_balances(self.account, available=10, reserved=0, used=0)

    def test_a_release_that_cannot_reach_the_server_leaves_the_exception_with_a_note(self) -> None:
        proxy = self.proxy()
        with fast_client(proxy.url) as c:
            with self.assertRaises(Boom) as caught:
                with c.hold(self.account, 3, ttl_ms=60_000) as h:
                    proxy.kill()  # the server is out of reach from here on
                    raise Boom("the paid call failed")
        notes = getattr(caught.exception, "__notes__", [])
        self.assertEqual(len(notes), 1)
        self.assertIn(f"the hold {h.hold_id} was not released", notes[0])
        self.assertIn("connect", notes[0])
        # Nothing was released: the hold stays reserved until it expires.
        self.assertEqual(self.admin.get_hold(h.hold_id).status, "active")
        self.assert_balances(self.account, available=7, reserved=3, used=0)

    def test_s9_commit_in_the_block_charges_what_was_used(self) -> None:
        with self.admin.hold(self.account, 3, request_id=f"ctx-2-{self.account}") as h:
            committed = h.commit(2)
        self.assertEqual((committed.status, committed.committed_amount), ("committed", 2))
        self.assertEqual(self.admin.get_hold(h.hold_id).status, "committed")
        self.assert_balances(self.account, available=8, reserved=0, used=2)

    def test_a_block_that_ends_without_commit_or_release_commits_the_whole_hold(self) -> None:
        with self.admin.hold(self.account, 4) as h:
            pass
        hold = self.admin.get_hold(h.hold_id)
        self.assertEqual((hold.status, hold.committed_amount), ("committed", 4))
        self.assertEqual(hold.request_id, h.request_id)
        self.assert_balances(self.account, available=6, reserved=0, used=4)

    def test_a_release_in_the_block_is_not_followed_by_a_commit(self) -> None:
        with self.admin.hold(self.account, 4) as h:
            h.release("not needed")
        self.assertEqual(self.admin.get_hold(h.hold_id).status, "released")
        self.assert_balances(self.account, available=10, reserved=0, used=0)

    def test_an_exception_after_commit_keeps_the_commit(self) -> None:
        with self.assertRaises(Boom):
            with self.admin.hold(self.account, 3) as h:
                h.commit(1)
                raise Boom("after the charge")
        self.assertEqual(self.admin.get_hold(h.hold_id).status, "committed")
        self.assert_balances(self.account, available=9, reserved=0, used=1)

    def test_a_refused_reservation_never_runs_the_block(self) -> None:
        ran = False
        with self.assertRaises(InsufficientCreditsError):
            with self.admin.hold(self.account, 11):
                ran = True
        self.assertFalse(ran)
        self.assertEqual(self.holds_of(self.account), 0)

    def test_extend_in_the_block_pushes_the_expiry(self) -> None:
        with self.admin.hold(self.account, 1, ttl_ms=60_000) as h:
            before = h.hold.expires_at
            after = h.extend(600_000).expires_at
            self.assertGreater(after, before)  # RFC 3339 UTC strings of one format sort as times
            h.commit()
        self.assert_balances(self.account, available=9, reserved=0, used=1)



class DoubleClickTest(ServerTestCase):
    """Two clicks with one request_id share one hold (S15): the click whose reserve was a replay
    never releases the hold, which the other click may still be working under."""

    def test_s15_the_replayed_click_that_fails_does_not_release_the_other_clicks_hold(self) -> None:
        request_id = f"click-{self.account}"
        with fast_client(self.server.url) as first, fast_client(self.server.url) as second:
            with first.hold(self.account, 3, request_id=request_id) as a:
                self.assertFalse(a.replayed)
                with self.assertRaises(Boom):
                    with second.hold(self.account, 3, request_id=request_id) as b:
                        self.assertTrue(b.replayed)
                        self.assertEqual(b.hold_id, a.hold_id)
                        raise Boom("the second click's generation failed")
                self.assertEqual(self.admin.get_hold(a.hold_id).status, "active", "still the first click's")
                a.commit(2)  # the first click's generation went well: it is charged
        self.assertEqual(self.holds_of(self.account), 1)
        self.assert_balances(self.account, available=8, reserved=0, used=2)

    def test_s15_a_replayed_click_that_finishes_first_charges_once_and_the_failing_maker_cannot_undo_it(
            self) -> None:
        request_id = f"click-{self.account}"
        with fast_client(self.server.url) as first, fast_client(self.server.url) as second:
            with self.assertRaises(Boom) as caught:
                with first.hold(self.account, 3, request_id=request_id) as a:
                    with second.hold(self.account, 3, request_id=request_id) as b:
                        pass  # the second click's image is done: the whole hold is committed
                    self.assertEqual(b.hold.status, "committed")
                    raise Boom("the first click's generation failed")
        self.assertIn("was not released", caught.exception.__notes__[0])  # 409 hold_committed
        hold = self.admin.get_hold(a.hold_id)
        self.assertEqual((hold.status, hold.committed_amount), ("committed", 3))
        self.assert_balances(self.account, available=7, reserved=0, used=3)

    def test_a_replay_of_a_committed_hold_is_not_charged_again(self) -> None:
        request_id = f"again-{self.account}"
        with self.admin.hold(self.account, 3, request_id=request_id) as a:
            a.commit(2)
        with self.admin.hold(self.account, 3, request_id=request_id) as again:
            self.assertTrue(again.replayed)
        self.assertEqual(again.hold.committed_amount, 2)
        self.assert_balances(self.account, available=8, reserved=0, used=2)

    def test_a_replay_of_a_released_hold_raises_at_the_commit(self) -> None:
        request_id = f"gone-{self.account}"
        with self.admin.hold(self.account, 3, request_id=request_id) as a:
            a.release("the guest left")
        with self.assertRaises(ProblemError) as caught:
            with self.admin.hold(self.account, 3, request_id=request_id) as again:
                self.assertTrue(again.replayed)
        self.assertEqual((caught.exception.status, caught.exception.code), (409, "hold_released"))
        self.assert_balances(self.account, available=10, reserved=0, used=0)


if __name__ == "__main__":
    unittest.main()
