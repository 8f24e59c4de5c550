"""``with client.hold(account, amount) as h:`` — reserve, then commit or release, never forget
(``client.hold(account, feature="image.gen", quantity=2)`` reserves by feature, api.md Prices).

On entry the hold is reserved (the request_id is fixed before, so every attempt and a later look-up
use the same one). The server answers 201 when this reserve made the hold, 200 when a hold with
this request_id existed already — a replay (``h.replayed``): another click, tab or process with the
same request_id made it and may still be using it (or an attempt of this very call whose answer was
lost: the client cannot tell the two apart, so it counts as a replay too). On exit:

- the block raised: a hold this helper made is released (reason names the exception) and the
  exception goes on; if the release itself fails (the server is unreachable), the original
  exception still goes on, with a note, and the hold comes back to available when it expires (its
  ``ttl_ms``). A **replayed** hold is never released: the one who made it may still be working
  under it (a double click whose other click is still generating); it is committed or released by
  them, or comes back when it expires;
- the block ended normally and neither ``h.commit`` nor ``h.release`` was called: the whole hold is
  committed (the work was done) — a replayed one too (the work was done under it; the charge is
  made once whoever commits first), unless it was already committed when the reserve answered
  (the charge was made once already); a replayed hold that was released or had expired answers
  the commit with a 409 (``hold_released``…), raised: the work was not paid for;
- ``h.commit(n)`` or ``h.release()`` already ended it: nothing more is sent.

Holds deduplicate the charge, not the work: two clicks with one request_id both run their block
under one hold. To run the work once, check ``h.replayed`` (and skip the work), or submit a job
(``client.submit_job``), which deduplicates the work itself.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any

from .errors import TollgateError
from .models import Hold

if TYPE_CHECKING:
    from .client import Client

RELEASE_REASON_LENGTH_MAX = 1024


class HoldContext:
    """A reservation scoped to a ``with`` block; see the module's docstring."""

    def __init__(self, client: Client, reserve_body: dict[str, Any]) -> None:
        self._client = client
        self._body = reserve_body
        self._hold: Hold | None = None
        self._replayed = False
        self._ended = False

    @property
    def request_id(self) -> str:
        """The reservation's request_id (made before anything was sent when none was given)."""
        return str(self._body["request_id"])

    @property
    def hold(self) -> Hold:
        """The hold as last answered by the server."""
        if self._hold is None:
            raise RuntimeError("the hold is reserved on entering the with block")
        return self._hold

    @property
    def hold_id(self) -> str:
        return self.hold.hold_id

    @property
    def replayed(self) -> bool:
        """True when the reserve was answered 200: a hold with this request_id existed already (see
        the module's docstring); False when this reserve made it (201)."""
        if self._hold is None:
            raise RuntimeError("the hold is reserved on entering the with block")
        return self._replayed

    def __enter__(self) -> HoldContext:
        b = self._body
        self._hold = self._client.reserve(b["account_id"], b.get("amount"), feature=b.get("feature"),
                                          quantity=b.get("quantity"), request_id=b["request_id"],
                                          ttl_ms=b.get("ttl_ms"), metadata=b.get("metadata"))
        last = self._client.last_call
        self._replayed = last is not None and last.status == 200
        return self

    def commit(self, amount: int | None = None, *, quantity: int | None = None) -> Hold:
        """Commits ``amount`` (default: all) of the hold — or ``quantity`` units at its ``unit_price``
        (a hold reserved by feature); the rest goes back to available."""
        self._hold = self._client.commit(self.hold_id, amount, quantity=quantity)
        self._ended = True
        return self._hold

    def release(self, reason: str | None = None) -> Hold:
        """Releases the whole hold."""
        self._hold = self._client.release(self.hold_id, reason)
        self._ended = True
        return self._hold

    def extend(self, ttl_ms: int) -> Hold:
        """Pushes the expiry to ``ttl_ms`` from now (for work that takes longer than planned)."""
        self._hold = self._client.extend(self.hold_id, ttl_ms)
        return self._hold

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self._hold is None or self._ended:
            return
        if exc is None:
            if not (self._replayed and self._hold.status == "committed"):
                self.commit()
            return
        if self._replayed:
            exc.add_note(f"tollgate: the hold {self.hold_id} was not released: its reserve was a replay (another "
                         "caller with this request_id made it and may still be using it)")
            return
        reason = f"{type(exc).__name__} in the hold's with block: {exc}"[:RELEASE_REASON_LENGTH_MAX]
        try:
            self.release(reason)
        except TollgateError as e:
            exc.add_note(f"tollgate: the hold {self.hold_id} was not released ({e}); it returns to available "
                         "when it expires")
