"""The exceptions of the tollgate client.

Every failure of a call is a :class:`TollgateError` carrying ``code``, ``status`` and ``detail``:

- :class:`ProblemError` — the server (or a proxy) answered, but not with 2xx: its RFC 9457 problem
  document, decoded. ``code`` is the stable machine-readable part (``insufficient_credits``,
  ``hold_released``…); ``http_<status>`` when the answer was not a problem document.
  A few codes have their own subclass, for ``except`` clauses that read like the behaviour.
- :class:`TransportError` — no HTTP answer at all (connect failure, time-out, lost connection, an
  answer that is not HTTP or not JSON); ``status`` is 0, ``code`` names the failure.
- :class:`InvalidArgumentError` — a bad argument, found before anything was sent; ``status`` 0,
  ``code`` ``invalid_argument``. Also a :class:`ValueError`.

``attempts`` says how many attempts the call took (0 when nothing was sent).
"""

from __future__ import annotations

from typing import Any


class TollgateError(Exception):
    """Base of every error the client raises."""

    code: str
    status: int
    detail: str
    attempts: int

    def __init__(self, code: str, status: int, detail: str, attempts: int) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.status = status
        self.detail = detail
        self.attempts = attempts


class ProblemError(TollgateError):
    """The server refused or failed the call (a non-2xx answer)."""

    title: str
    available: int | None
    requested: int | None
    retry_after_ms: int | None
    expires_at: str | None
    missing_scope: str | None
    body: dict[str, Any] | None

    def __init__(self, *, status: int, code: str, title: str, detail: str, attempts: int,
                 available: int | None = None, requested: int | None = None,
                 retry_after_ms: int | None = None, expires_at: str | None = None,
                 missing_scope: str | None = None, body: dict[str, Any] | None = None) -> None:
        super().__init__(code, status, detail, attempts)
        self.title = title
        self.available = available
        self.requested = requested
        self.retry_after_ms = retry_after_ms
        self.expires_at = expires_at
        self.missing_scope = missing_scope
        self.body = body

    def __str__(self) -> str:
        text = f"{self.code}: {self.detail}"
        if self.available is not None or self.requested is not None:
            figures = []
            if self.available is not None:
                figures.append(f"available {self.available}")
            if self.requested is not None:
                figures.append(f"requested {self.requested}")
            text += f" ({', '.join(figures)})"
        if self.expires_at is not None:
            text += f" (expires_at {self.expires_at})"
        return text


class InsufficientCreditsError(ProblemError):
    """409 ``insufficient_credits``: ``detail`` can be shown to a kiosk user as it is."""


class RefundExceedsChargeError(ProblemError):
    """409 ``refund_exceeds_charge``: a refund of more than the hold charged and has not given back
    yet (or of a hold with nothing left to give back). Ask for less, or nothing more."""


class ForbiddenError(ProblemError):
    """403 ``forbidden``: the key may not make this call. ``missing_scope`` names the scope it lacks
    (``holds:write``, ``jobs:write``, ``read``, ``admin`` or ``admin:read``) when its scopes are why;
    None for an account key on an admin-only route of a server older than scopes."""


class NotFoundError(ProblemError):
    """404 ``not_found`` (also what an account key sees of another account's resources)."""


class RateLimitedError(ProblemError):
    """429 ``rate_limited``: ``retry_after_ms`` says when the attempt would be admitted."""


class UnavailableError(ProblemError):
    """503 ``unavailable``, ``overloaded``, ``storage_full`` (the server's disk is full) or
    ``storage_failed`` (a flush failed: that server refuses writes until restarted), or a 502/503/504
    that is not a problem document (a balancer's: ``code`` ``http_502``…), still so after the
    client's retries."""


PROBLEM_CLASSES: dict[str, type[ProblemError]] = {
    "insufficient_credits": InsufficientCreditsError,
    "refund_exceeds_charge": RefundExceedsChargeError,
    "forbidden": ForbiddenError,
    "not_found": NotFoundError,
    "rate_limited": RateLimitedError,
    "unavailable": UnavailableError,
    "overloaded": UnavailableError,
    "storage_full": UnavailableError,
    "storage_failed": UnavailableError,
}


class TransportError(TollgateError):
    """No HTTP answer: ``code`` is one of ``resolve``, ``connect``, ``tls`` (https: the server's
    certificate was refused or the handshake failed; never tried again), ``timeout``,
    ``connection_lost``, ``bad_response``."""

    def __init__(self, failure: str, message: str, attempts: int) -> None:
        super().__init__(failure, 0, message, attempts)


class InvalidArgumentError(TollgateError, ValueError):
    """A bad argument, refused before any request was sent."""

    argument: str

    def __init__(self, argument: str, why: str) -> None:
        super().__init__("invalid_argument", 0, f"{argument}: {why}", 0)
        self.argument = argument
