"""The tollgate client: one method per call of the HTTP API (docs/openapi.json).

Each method checks its arguments (a bad one raises InvalidArgumentError and nothing is sent),
sends one logical call with the retry policy of :mod:`tollgate_client.transport`, and answers a
typed result (:mod:`tollgate_client.models`) or raises a :class:`~tollgate_client.errors.ProblemError`
(the server's refusal: ``code``, ``status``, ``detail``) or a
:class:`~tollgate_client.errors.TransportError` (no answer).

Not thread-safe (one kept-alive connection): use one Client per thread. ``with Client(...) as c:``
closes the connection at the end.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import enum
import re
import ssl
import time
from collections.abc import Callable
from typing import Any

from . import validate as v
from .errors import InvalidArgumentError, ProblemError, TransportError
from .hold import HoldContext
from .models import (Account, AccountPage, Audit, EventPage, Hold, HoldCheck, HoldPage, IdempotencyKey, Job, JobHistory,
                     JobPage, KeyInfo, KeyPage, Lock, LotPage, NewKey, Price, PricePage, PriceVersionPage, RateLimitDecision,
                     RateLimitReset, Readiness, RevokedKey, Transfer, TransferRecord, DeletedWebhookEndpoint,
                     WebhookDeliveryPage, WebhookEndpoint, WebhookEndpointPage)
from .transport import CallInfo, Resend, RetryPolicy, Transport, encode_component, new_request_id

REQUEST_ID_PREFIX_PATTERN = re.compile(r"[A-Za-z0-9._:@-]{0,100}")


class Unchanged(enum.Enum):
    """The type of :data:`UNCHANGED`."""

    UNCHANGED = "unchanged"


#: ``update_account(max_active_holds=UNCHANGED)``: leave the setting as it is (None removes the limit).
UNCHANGED = Unchanged.UNCHANGED


def target(path: str, **query: str | int | None) -> str:
    """``path`` with the query parameters that are not None, each value encoded."""
    pairs = [f"{name}={encode_component(str(value))}" for name, value in query.items() if value is not None]
    return path + ("?" + "&".join(pairs) if pairs else "")


def optional_limit(limit: int | None) -> int | None:
    return None if limit is None else v.page_limit(limit)


def optional_id(name: str, value: str | None) -> str | None:
    return None if value is None else v.identifier(name, value)


def amount_or_feature(amount: int | None, feature: str | None, quantity: int | None) -> dict[str, Any]:
    """What a reservation (or its check) holds: ``{"amount"}``, or ``{"feature", "quantity"?}`` —
    exactly one of amount and feature, quantity only with feature (api.md, Prices)."""
    if amount is not None and feature is not None:
        raise InvalidArgumentError("feature", "give either amount or feature, not both")
    if amount is None and feature is None:
        raise InvalidArgumentError("amount", "amount or feature is required")
    if feature is None:
        if quantity is not None:
            raise InvalidArgumentError("quantity", "goes with feature: a reservation by amount has none")
        return {"amount": v.amount("amount", amount)}
    body: dict[str, Any] = {"feature": v.identifier("feature", feature)}
    if quantity is not None:
        body["quantity"] = v.amount("quantity", quantity)
    return body


def _price_path(feature: str) -> str:
    return "/v1/prices/" + encode_component(v.identifier("feature", feature))


class Client:
    """A client of one tollgate server.

    ``base_url`` is ``http://host:port``; ``key`` an admin or account key (None sends no
    Authorization header). Time-outs are per attempt (see :mod:`tollgate_client.transport`); the
    retry policy (``retry``, docs/reference/retries.md) repeats a failed call within its budget
    (10 s by default), so the worst case of one call is ``retry.budget_ms`` plus one attempt's
    time-outs. ``with_retry(...)`` gives a client with another policy for some calls.
    ``request_id_prefix`` starts the ids the client makes for reserve, submit_job and the refunds
    when the caller gives none (one per logical call: all its attempts reuse it). ``sleep`` is how
    the client waits between attempts (tests pass their own). ``tls_context`` is for an
    ``https://`` base_url whose certificate is signed by a private CA
    (``ssl.create_default_context(cafile=...)``); without it the system's CAs are used. The
    certificate and the host name are always checked.
    """

    def __init__(self, base_url: str = "http://127.0.0.1:8080", key: str | None = None, *,
                 connect_timeout_ms: int = 2000, request_timeout_ms: int = 10_000,
                 retry: RetryPolicy = RetryPolicy(), request_id_prefix: str = "client-",
                 sleep: Callable[[float], None] = time.sleep,
                 tls_context: ssl.SSLContext | None = None) -> None:
        if not isinstance(request_id_prefix, str) or REQUEST_ID_PREFIX_PATTERN.fullmatch(request_id_prefix) is None:
            raise InvalidArgumentError("request_id_prefix", "must be 0-100 characters of A-Z a-z 0-9 . _ : @ -")
        self._transport = Transport(base_url, key, connect_timeout_ms=connect_timeout_ms,
                                    request_timeout_ms=request_timeout_ms, retry=retry, sleep=sleep,
                                    tls_context=tls_context)
        self.request_id_prefix = request_id_prefix
        self._retry: RetryPolicy | None = None  # None: the transport's (the constructor's) policy

    def with_retry(self, retry: RetryPolicy | None = None, **changes: Any) -> Client:
        """This client (the same connection) with another retry policy: ``retry``, or this one's
        with ``changes`` (``client.with_retry(budget_ms=2000).reserve(...)``). Not thread-safe, as
        the client it shares its connection with."""
        base = retry if retry is not None else (self._retry or self._transport.retry)
        if not isinstance(base, RetryPolicy):
            raise InvalidArgumentError("retry", "must be a RetryPolicy")
        try:
            policy = dataclasses.replace(base, **changes)
        except TypeError as e:
            raise InvalidArgumentError("retry", f"unknown setting: {e}") from e
        policy.check()
        other = copy.copy(self)
        other._retry = policy
        return other

    @property
    def retry(self) -> RetryPolicy:
        """The retry policy of this client's calls."""
        return self._retry or self._transport.retry

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the kept-alive connection (a later call opens a new one)."""
        self._transport.close()

    @property
    def last_call(self) -> CallInfo | None:
        """The final HTTP status (0: no answer) and the attempts of the last call that was sent."""
        return self._transport.last_call

    def new_request_id(self) -> str:
        """A fresh id: ``request_id_prefix`` and 16 random hex digits. Keep it to retry later."""
        return new_request_id(self.request_id_prefix)

    def _get(self, path: str, *, timeout_extra_ms: int = 0, resend: Resend = Resend.SAFE) -> Any:
        return self._transport.call("GET", path, resend=resend, timeout_extra_ms=timeout_extra_ms, retry=self._retry)

    def _post(self, path: str, body: dict[str, Any], *, resend: Resend = Resend.SAFE,
              retry_insufficient_credits: bool = False) -> Any:
        return self._transport.call("POST", path, body, has_body=True, resend=resend,
                                    retry_insufficient_credits=retry_insufficient_credits, retry=self._retry)

    # --- accounts and credits -------------------------------------------------------------------

    def create_account(self, account_id: str, *, overdraft_limit: int | None = None,
                       max_active_holds: int | None = None) -> Account:
        """POST /v1/accounts (admin): 201 new, 200 if it exists with the same settings, else 409 conflict."""
        body: dict[str, Any] = {"account_id": v.identifier("account_id", account_id)}
        if overdraft_limit is not None:
            body["overdraft_limit"] = v.integer("overdraft_limit", overdraft_limit, 0, v.AMOUNT_MAX)
        if max_active_holds is not None:
            body["max_active_holds"] = v.integer("max_active_holds", max_active_holds, 1, v.MAX_ACTIVE_HOLDS_MAX)
        return Account.from_json(self._post("/v1/accounts", body))

    def get_account(self, account_id: str) -> Account:
        """GET /v1/accounts/{account_id} (admin, or that account's key)."""
        return Account.from_json(self._get("/v1/accounts/" + encode_component(v.identifier("account_id", account_id))))

    def list_accounts(self, *, limit: int | None = None, starting_after: str | None = None) -> AccountPage:
        """GET /v1/accounts (admin): by account_id ascending; page on with the last one's id."""
        path = target("/v1/accounts", limit=optional_limit(limit),
                      starting_after=optional_id("starting_after", starting_after))
        return AccountPage.from_json(self._get(path))

    def update_account(self, account_id: str, *, overdraft_limit: int | None = None,
                       max_active_holds: int | None | Unchanged = UNCHANGED,
                       frozen: bool | None = None,
                       low_balance_threshold: int | None | Unchanged = UNCHANGED) -> Account:
        """PATCH /v1/accounts/{account_id} (admin): only the settings given change (absolute values,
        so a resend changes nothing more). ``max_active_holds=None`` removes the limit; a frozen
        account refuses new holds, jobs and debits (409 account_frozen). ``low_balance_threshold``
        turns on balance notices (balance_low, balance_depleted, balance_recovered events); None
        turns them off."""
        body: dict[str, Any] = {}
        if overdraft_limit is not None:
            body["overdraft_limit"] = v.integer("overdraft_limit", overdraft_limit, 0, v.AMOUNT_MAX)
        if max_active_holds is None:
            body["max_active_holds"] = None
        elif not isinstance(max_active_holds, Unchanged):
            body["max_active_holds"] = v.integer("max_active_holds", max_active_holds, 1, v.MAX_ACTIVE_HOLDS_MAX)
        if frozen is not None:
            body["frozen"] = v.boolean("frozen", frozen)
        if low_balance_threshold is None:
            body["low_balance_threshold"] = None
        elif not isinstance(low_balance_threshold, Unchanged):
            body["low_balance_threshold"] = v.integer("low_balance_threshold", low_balance_threshold, 1, v.AMOUNT_MAX)
        path = "/v1/accounts/" + encode_component(v.identifier("account_id", account_id))
        return Account.from_json(self._transport.call("PATCH", path, body, has_body=True, retry=self._retry))

    def credit(self, account_id: str, amount: int, reference: str, *,
               expires_at: str | datetime.datetime | None = None, priority: int | None = None,
               category: str | None = None) -> Transfer:
        """POST /v1/accounts/{account_id}/credits (admin): the credit makes a lot (``event.lot_id``).
        ``expires_at``: RFC 3339 (or an aware datetime) in the future, when the lot's unspent credits
        expire (None: never); ``priority``: 0-100, lower spent first (None: 50); ``category``:
        ``"paid"`` or ``"promotional"`` (None: paid). The same reference again adds nothing (200),
        whatever lot fields it carries."""
        body: dict[str, Any] = {"amount": v.amount("amount", amount), "reference": v.identifier("reference", reference)}
        if expires_at is not None:
            body["expires_at"] = v.timestamp("expires_at", expires_at)
        if priority is not None:
            body["priority"] = v.integer("priority", priority, 0, v.LOT_PRIORITY_MAX)
        if category is not None:
            body["category"] = v.one_of("category", category, v.LOT_CATEGORIES)
        path = "/v1/accounts/" + encode_component(v.identifier("account_id", account_id)) + "/credits"
        return Transfer.from_json(self._post(path, body))

    def list_lots(self, account_id: str, *, status: str | None = None, limit: int | None = None,
                  starting_after: str | None = None) -> LotPage:
        """GET /v1/accounts/{account_id}/lots (scope read): the account's credit lots in spending
        order; ``status`` ``active``, ``expired`` or ``spent`` (None: all); page on with the last
        one's ``lot_id``."""
        path = target("/v1/accounts/" + encode_component(v.identifier("account_id", account_id)) + "/lots",
                      status=None if status is None else v.one_of("status", status, v.LOT_STATUSES),
                      limit=optional_limit(limit), starting_after=optional_id("starting_after", starting_after))
        return LotPage.from_json(self._get(path))

    def debit(self, account_id: str, amount: int, reference: str, reason: str) -> Transfer:
        """POST /v1/accounts/{account_id}/debits (admin): 409 insufficient_credits if not available."""
        body = {"amount": v.amount("amount", amount), "reference": v.identifier("reference", reference),
                "reason": v.text("reason", reason)}
        path = "/v1/accounts/" + encode_component(v.identifier("account_id", account_id)) + "/debits"
        return Transfer.from_json(self._post(path, body))

    def events(self, account_id: str, *, after: int = 0, limit: int | None = None) -> EventPage:
        """GET /v1/accounts/{account_id}/events: oldest first; continue with ``next_after``."""
        path = target("/v1/accounts/" + encode_component(v.identifier("account_id", account_id)) + "/events",
                      after=v.integer("after", after, 0, 2**63 - 1), limit=optional_limit(limit))
        return EventPage.from_json(self._get(path))

    def feed(self, *, after: int = 0, limit: int | None = None, wait_ms: int | None = None) -> EventPage:
        """GET /v1/events (admin): every account's events in commit order. Store ``next_after`` and
        pass it as ``after`` to miss nothing and see nothing twice. With ``wait_ms`` an empty answer
        waits until something new is durable (the request time-out is raised by ``wait_ms``)."""
        wait = None if wait_ms is None else v.integer("wait_ms", wait_ms, 0, v.WAIT_MS_MAX)
        path = target("/v1/events", after=v.integer("after", after, 0, 2**63 - 1), limit=optional_limit(limit),
                      wait_ms=wait)
        return EventPage.from_json(self._get(path, timeout_extra_ms=wait or 0))

    def get_transfer(self, reference: str) -> TransferRecord:
        """GET /v1/transfers/{reference}: the credit or debit recorded under it (a lost answer: look)."""
        return TransferRecord.from_json(
            self._get("/v1/transfers/" + encode_component(v.identifier("reference", reference))))

    # --- keys (admin) ---------------------------------------------------------------------------

    @staticmethod
    def _key_body(scopes: list[str] | None, allowed: tuple[str, ...], expires_at: str | datetime.datetime | None,
                  name: str | None) -> dict[str, Any]:
        body: dict[str, Any] = {}
        if scopes is not None:
            body["scopes"] = v.scopes(scopes, allowed)
        if expires_at is not None:
            body["expires_at"] = v.timestamp("expires_at", expires_at)
        if name is not None:
            body["name"] = v.key_name(name)
        return body

    def create_key(self, account_id: str, *, scopes: list[str] | None = None,
                   expires_at: str | datetime.datetime | None = None, name: str | None = None) -> NewKey:
        """POST /v1/accounts/{account_id}/keys: a new account key; its secret is shown this once.
        ``scopes``: any of ``holds:write``, ``jobs:write``, ``read`` (None: all three);
        ``expires_at``: RFC 3339 (or an aware datetime) in the future (None: never); ``name``: 1-100
        bytes. Not idempotent (each call makes a key): sent again only if it certainly never arrived."""
        path = "/v1/accounts/" + encode_component(v.identifier("account_id", account_id)) + "/keys"
        body = self._key_body(scopes, v.ACCOUNT_SCOPES, expires_at, name)
        return NewKey.from_json(self._post(path, body, resend=Resend.ONLY_IF_UNSENT))

    def create_admin_key(self, scope: str, *, expires_at: str | datetime.datetime | None = None,
                         name: str | None = None) -> NewKey:
        """POST /v1/keys (admin scope): a new admin key, ``scope`` ``"admin"`` (everything) or
        ``"admin:read"`` (every read, no change at all); ``account_id`` is None. Not idempotent."""
        body = self._key_body([v.one_of("scope", scope, v.ADMIN_SCOPES)], v.ADMIN_SCOPES, expires_at, name)
        return NewKey.from_json(self._post("/v1/keys", body, resend=Resend.ONLY_IF_UNSENT))

    def whoami(self) -> KeyInfo:
        """GET /v1/key (any valid key): the key this client calls with — its id, account (None: an
        admin key), scopes, name, expiry."""
        return KeyInfo.from_json(self._get("/v1/key"))

    def revoke_key(self, key_id: str) -> RevokedKey:
        """DELETE /v1/keys/{key_id}."""
        path = "/v1/keys/" + encode_component(v.server_id("key_id", key_id))
        return RevokedKey.from_json(self._transport.call("DELETE", path, retry=self._retry))

    def list_keys(self, *, account_id: str | None = None, limit: int | None = None,
                  starting_after: str | None = None) -> KeyPage:
        """GET /v1/keys: newest first, never secrets."""
        after = None if starting_after is None else v.server_id("starting_after", starting_after)
        path = target("/v1/keys", account_id=optional_id("account_id", account_id), limit=optional_limit(limit),
                      starting_after=after)
        return KeyPage.from_json(self._get(path))

    # --- webhook endpoints (admin) -----------------------------------------------------------------

    def create_webhook_endpoint(self, url: str, *, event_types: list[str] | None = None,
                                account_id: str | None = None, description: str | None = None) -> WebhookEndpoint:
        """POST /v1/webhook-endpoints: an endpoint, enabled; its ``secret`` is shown this once. None
        event_types / account_id: every type, every account. Not idempotent (each call makes one):
        sent again only if it certainly never arrived."""
        body: dict[str, Any] = {"url": v.text("url", url, 2048)}
        if event_types is not None:
            body["event_types"] = _event_types(event_types)
        if account_id is not None:
            body["account_id"] = v.identifier("account_id", account_id)
        if description is not None:
            body["description"] = v.text("description", description)
        return WebhookEndpoint.from_json(self._post("/v1/webhook-endpoints", body, resend=Resend.ONLY_IF_UNSENT))

    def list_webhook_endpoints(self, *, limit: int | None = None,
                               starting_after: str | None = None) -> WebhookEndpointPage:
        """GET /v1/webhook-endpoints: in the order they were made, never secrets."""
        after = None if starting_after is None else v.server_id("starting_after", starting_after)
        path = target("/v1/webhook-endpoints", limit=optional_limit(limit), starting_after=after)
        return WebhookEndpointPage.from_json(self._get(path))

    def get_webhook_endpoint(self, endpoint_id: str) -> WebhookEndpoint:
        """GET /v1/webhook-endpoints/{endpoint_id} (never its secret)."""
        return WebhookEndpoint.from_json(self._get(_endpoint_path(endpoint_id)))

    def update_webhook_endpoint(self, endpoint_id: str, *, url: str | None = None,
                                event_types: list[str] | None | Unchanged = UNCHANGED,
                                description: str | None = None, status: str | None = None) -> WebhookEndpoint:
        """PATCH /v1/webhook-endpoints/{endpoint_id}: only what is given changes (absolute values: a
        resend changes nothing more). ``event_types=None``: every type again; ``status``: enabled,
        disabled."""
        body: dict[str, Any] = {}
        if url is not None:
            body["url"] = v.text("url", url, 2048)
        if event_types is None:
            body["event_types"] = None
        elif not isinstance(event_types, Unchanged):
            body["event_types"] = _event_types(event_types)
        if description is not None:
            body["description"] = v.text("description", description)
        if status is not None:
            body["status"] = v.one_of("status", status, ("enabled", "disabled"))
        return WebhookEndpoint.from_json(self._transport.call("PATCH", _endpoint_path(endpoint_id), body, has_body=True,
                                                              retry=self._retry))

    def delete_webhook_endpoint(self, endpoint_id: str) -> DeletedWebhookEndpoint:
        """DELETE /v1/webhook-endpoints/{endpoint_id} (a resend after a lost answer: 404, it is gone)."""
        return DeletedWebhookEndpoint.from_json(self._transport.call("DELETE", _endpoint_path(endpoint_id),
                                                                     retry=self._retry))

    def rotate_webhook_secret(self, endpoint_id: str) -> WebhookEndpoint:
        """POST /v1/webhook-endpoints/{endpoint_id}/rotate-secret: the endpoint with its new ``secret``
        (shown this once); the old one signs beside it for 24 h. Sent again only if it certainly never
        arrived."""
        return WebhookEndpoint.from_json(self._post(_endpoint_path(endpoint_id) + "/rotate-secret", {},
                                                    resend=Resend.ONLY_IF_UNSENT))

    def list_webhook_deliveries(self, endpoint_id: str, *, status: str | None = None, limit: int | None = None,
                                starting_after: str | None = None) -> WebhookDeliveryPage:
        """GET /v1/webhook-endpoints/{endpoint_id}/deliveries: each event's delivery, newest event
        first; ``status``: pending, delivered, failed; ``starting_after``: a delivery's webhook_id."""
        after = None if starting_after is None else v.server_id("starting_after", starting_after)
        path = target(_endpoint_path(endpoint_id) + "/deliveries",
                      status=None if status is None else v.one_of("status", status, v.DELIVERY_STATUSES),
                      limit=optional_limit(limit), starting_after=after)
        return WebhookDeliveryPage.from_json(self._get(path))

    def replay_webhook_endpoint(self, endpoint_id: str, *, after: int) -> WebhookEndpoint:
        """POST /v1/webhook-endpoints/{endpoint_id}/replay (202): every event after the feed cursor
        ``after`` (0: the whole feed) that the endpoint wants is sent again, its webhook-id unchanged.
        Sent again after a lost answer: the cursor only moves back, and the receiver deduplicates
        what comes twice by webhook-id."""
        body = {"after": v.integer("after", after, 0, 2**63 - 1)}
        return WebhookEndpoint.from_json(self._post(_endpoint_path(endpoint_id) + "/replay", body))

    # --- holds ----------------------------------------------------------------------------------

    def reserve_body(self, account_id: str, amount: int | None, request_id: str | None, ttl_ms: int | None,
                     metadata: dict[str, Any] | None, *, feature: str | None = None,
                     quantity: int | None = None) -> dict[str, Any]:
        """Checks a reservation's arguments; makes the request_id if none is given."""
        body: dict[str, Any] = {
            "account_id": v.identifier("account_id", account_id),
            **amount_or_feature(amount, feature, quantity),
            "request_id": self.new_request_id() if request_id is None else v.identifier("request_id", request_id),
        }
        if ttl_ms is not None:
            body["ttl_ms"] = v.integer("ttl_ms", ttl_ms, 1, 2**63 - 1)
        if metadata is not None:
            body["metadata"] = v.json_value("metadata", metadata, must_be_object=True)
        return body

    def reserve(self, account_id: str, amount: int | None = None, *, feature: str | None = None,
                quantity: int | None = None, request_id: str | None = None, ttl_ms: int | None = None,
                metadata: dict[str, Any] | None = None) -> Hold:
        """POST /v1/holds: move ``amount`` from available to reserved — or, with ``feature`` instead
        of ``amount``, ``quantity`` (default 1) × the feature's current price (set_price); the hold
        then keeps ``feature``, ``quantity``, ``unit_price`` and ``price_version``. Exactly one of
        ``amount`` and ``feature``; a feature without a price: 400 (ProblemError).

        Every attempt sends the same request_id (made once here when none is given), so a resent
        reservation finds the first one's hold (200) instead of making a second. 409
        insufficient_credits is asked once more at once, then raised as InsufficientCreditsError;
        pass your own ``request_id`` (new_request_id()) to repeat the reservation later."""
        body = self.reserve_body(account_id, amount, request_id, ttl_ms, metadata, feature=feature, quantity=quantity)
        return Hold.from_json(self._post("/v1/holds", body, retry_insufficient_credits=True))

    def check_hold(self, account_id: str, amount: int | None = None, *, feature: str | None = None,
                   quantity: int | None = None) -> HoldCheck:
        """POST /v1/holds/check (scope holds:write): the decision a reservation of ``amount`` (or
        ``quantity`` × ``feature``'s price) would meet now, without making it: ``allowed``, and when
        not, ``reason`` (the error code a reserve would raise) and ``detail``. Writes nothing, so it is
        resent like a read; a refusal is an answer, not an exception. It promises nothing: the
        reservation decides."""
        body = {"account_id": v.identifier("account_id", account_id), **amount_or_feature(amount, feature, quantity)}
        return HoldCheck.from_json(self._post("/v1/holds/check", body))

    def hold(self, account_id: str, amount: int | None = None, *, feature: str | None = None,
             quantity: int | None = None, request_id: str | None = None, ttl_ms: int | None = None,
             metadata: dict[str, Any] | None = None) -> HoldContext:
        """A context manager that reserves on entry and, on exit, commits the whole hold when the
        block ended normally without committing or releasing it, or releases it when the block
        raised::

            with client.hold("kiosk-1", 3, request_id="gen-1") as h:
                image = generate()          # an exception here releases the hold
                h.commit(2)                 # charge what was used; the rest goes back

        Reserve by ``feature`` and ``quantity`` instead of ``amount`` as with reserve; ``h.commit(quantity=n)``
        then charges n units at the hold's price. The arguments are checked now, before anything is
        sent; the reservation is made on entry."""
        body = self.reserve_body(account_id, amount, request_id, ttl_ms, metadata, feature=feature, quantity=quantity)
        return HoldContext(self, body)

    def commit(self, hold_id: str, amount: int | None = None, *, quantity: int | None = None) -> Hold:
        """POST /v1/holds/{hold_id}/commit: ``amount`` (default all) to used, the rest back to available.
        ``quantity`` instead of ``amount`` (a hold reserved by feature): quantity × the hold's
        ``unit_price``, the price it was reserved at. Committing again with the same amount moves
        nothing; 409 hold_released if released."""
        if amount is not None and quantity is not None:
            raise InvalidArgumentError("quantity", "give either amount or quantity, not both")
        body: dict[str, Any] = {}
        if amount is not None:
            body["amount"] = v.amount("amount", amount)
        if quantity is not None:
            body["quantity"] = v.amount("quantity", quantity)
        return Hold.from_json(self._post(f"/v1/holds/{encode_component(v.server_id('hold_id', hold_id))}/commit",
                                         body))

    def release(self, hold_id: str, reason: str | None = None) -> Hold:
        """POST /v1/holds/{hold_id}/release: the whole hold back to available (again: 200);
        409 hold_committed if committed."""
        body = {} if reason is None else {"reason": v.text("reason", reason)}
        return Hold.from_json(self._post(f"/v1/holds/{encode_component(v.server_id('hold_id', hold_id))}/release",
                                         body))

    def extend(self, hold_id: str, ttl_ms: int) -> Hold:
        """POST /v1/holds/{hold_id}/extend: the hold now expires ``ttl_ms`` from now (409 if not active).
        It carries no id that makes a second send a replay: sent again only if it certainly never
        arrived."""
        body = {"ttl_ms": v.integer("ttl_ms", ttl_ms, 1, 2**63 - 1)}
        return Hold.from_json(self._post(f"/v1/holds/{encode_component(v.server_id('hold_id', hold_id))}/extend",
                                         body, resend=Resend.ONLY_IF_UNSENT))

    def get_hold(self, hold_id: str) -> Hold:
        """GET /v1/holds/{hold_id}."""
        return Hold.from_json(self._get("/v1/holds/" + encode_component(v.server_id("hold_id", hold_id))))

    def list_holds(self, *, account_id: str | None = None, status: str | None = None,
                   request_id: str | None = None, limit: int | None = None,
                   starting_after: str | None = None) -> HoldPage:
        """GET /v1/holds: newest first. ``request_id`` finds the hold of a request whose answer was
        lost (look, do not re-post)."""
        path = target("/v1/holds", account_id=optional_id("account_id", account_id),
                      status=None if status is None else v.one_of("status", status, v.HOLD_STATUSES),
                      request_id=optional_id("request_id", request_id), limit=optional_limit(limit),
                      starting_after=None if starting_after is None else v.server_id("starting_after", starting_after))
        return HoldPage.from_json(self._get(path))

    def refund_body(self, reason: str, amount: int | None, request_id: str | None) -> dict[str, Any]:
        """Checks a refund's arguments; makes the request_id if none is given (once per call)."""
        body: dict[str, Any] = {
            "reason": v.text("reason", reason, length_min=1),
            "request_id": self.new_request_id() if request_id is None else v.identifier("request_id", request_id),
        }
        if amount is not None:
            body["amount"] = v.amount("amount", amount)
        return body

    def refund_hold(self, hold_id: str, *, reason: str, amount: int | None = None,
                    request_id: str | None = None) -> Hold:
        """POST /v1/holds/{hold_id}/refund (admin): give back ``amount`` (default: everything the hold
        charged and has not given back) of a charged hold (committed, or late-charged), from used to
        available; the hold's ``refunded_amount`` is what it has given back in all.

        Every attempt sends the same request_id (made once here when none is given), so a resent
        refund finds the first one and moves nothing more; pass your own ``request_id``
        (new_request_id()) to repeat it later. 409 refund_exceeds_charge (RefundExceedsChargeError)
        for more than is left; 409 conflict when the hold charged nothing or is a job's (refund_job);
        422 idempotency_mismatch for the same request_id with another hold or amount."""
        path = f"/v1/holds/{encode_component(v.server_id('hold_id', hold_id))}/refund"
        return Hold.from_json(self._post(path, self.refund_body(reason, amount, request_id)))

    # --- prices (admin) ----------------------------------------------------------------------------

    def set_price(self, feature: str, credits_per_unit: int) -> Price:
        """PUT /v1/prices/{feature}: what one unit of ``feature`` costs, in credits (1 to 2^53-1).
        Another price than the current one makes the next version (201, ``last_call.status``); the
        same one changes nothing (200), so a resend is safe. Holds already reserved keep their price."""
        body = {"credits_per_unit": v.amount("credits_per_unit", credits_per_unit)}
        return Price.from_json(self._transport.call("PUT", _price_path(feature), body, has_body=True,
                                                    retry=self._retry))

    def get_price(self, feature: str) -> Price:
        """GET /v1/prices/{feature} (admin read): the current price; NotFoundError when it has none."""
        return Price.from_json(self._get(_price_path(feature)))

    def list_prices(self, *, limit: int | None = None, starting_after: str | None = None) -> PricePage:
        """GET /v1/prices (admin read): every feature's current price, by feature ascending; page on
        with the last one's feature."""
        path = target("/v1/prices", limit=optional_limit(limit),
                      starting_after=optional_id("starting_after", starting_after))
        return PricePage.from_json(self._get(path))

    def list_price_versions(self, feature: str, *, limit: int | None = None,
                            starting_after: int | None = None) -> PriceVersionPage:
        """GET /v1/prices/{feature}/versions (admin read): the feature's prices, newest version first;
        page on with the last one's ``version``. NotFoundError when the feature has no price."""
        after = None if starting_after is None else v.integer("starting_after", starting_after, 1, 2**63 - 1)
        path = target(_price_path(feature) + "/versions", limit=optional_limit(limit), starting_after=after)
        return PriceVersionPage.from_json(self._get(path))

    # --- jobs -----------------------------------------------------------------------------------

    def submit_job(self, account_id: str, cost: int, provider: str, input: Any, *,
                   client_request_id: str | None = None) -> Job:
        """POST /v1/jobs: reserve ``cost``, then tollgate calls ``provider`` with ``input`` (any JSON
        value). 202 a new job; 200 the job as it is when the id was submitted before. Without a
        ``client_request_id`` one is made once here (every attempt reuses it)."""
        body = {
            "client_request_id": self.new_request_id() if client_request_id is None
            else v.identifier("client_request_id", client_request_id),
            "account_id": v.identifier("account_id", account_id),
            "cost": v.amount("cost", cost),
            "provider": v.identifier("provider", provider),
            "input": v.json_value("input", input),
        }
        return Job.from_json(self._post("/v1/jobs", body))

    def get_job(self, client_request_id: str, *, wait_ms: int | None = None) -> Job:
        """GET /v1/jobs/{id}: with ``wait_ms`` (0-60000) the server answers as soon as the job ends
        or the wait is over (the request time-out is raised by ``wait_ms``)."""
        wait = None if wait_ms is None else v.integer("wait_ms", wait_ms, 0, v.WAIT_MS_MAX)
        path = target("/v1/jobs/" + encode_component(v.identifier("client_request_id", client_request_id)),
                      wait_ms=wait)
        return Job.from_json(self._get(path, timeout_extra_ms=wait or 0))

    def cancel_job(self, client_request_id: str) -> Job:
        """POST /v1/jobs/{id}/cancel: cancelled (its hold released), or its end state if it had ended."""
        path = "/v1/jobs/" + encode_component(v.identifier("client_request_id", client_request_id)) + "/cancel"
        return Job.from_json(self._post(path, {}))

    def refund_job(self, client_request_id: str, *, reason: str, amount: int | None = None,
                   request_id: str | None = None) -> Job:
        """POST /v1/jobs/{id}/refund (admin): refund_hold for a completed job's hold; the job with its
        ``refunded_amount``. 409 conflict if the job did not complete. The request_id is made and
        reused as refund_hold's."""
        body = self.refund_body(reason, amount, request_id)
        path = "/v1/jobs/" + encode_component(v.identifier("client_request_id", client_request_id)) + "/refund"
        return Job.from_json(self._post(path, body))

    def list_jobs(self, *, account_id: str | None = None, status: str | None = None, limit: int | None = None,
                  starting_after: str | None = None) -> JobPage:
        """GET /v1/jobs: newest first."""
        path = target("/v1/jobs", account_id=optional_id("account_id", account_id),
                      status=None if status is None else v.one_of("status", status, v.JOB_STATUSES),
                      limit=optional_limit(limit), starting_after=optional_id("starting_after", starting_after))
        return JobPage.from_json(self._get(path))

    def job_history(self, client_request_id: str) -> JobHistory:
        """GET /v1/jobs/{id}/history: the job's story, oldest first."""
        path = "/v1/jobs/" + encode_component(v.identifier("client_request_id", client_request_id)) + "/history"
        return JobHistory.from_json(self._get(path))

    # --- locks (admin) --------------------------------------------------------------------------

    @staticmethod
    def _lock_path(key: str, action: str = "") -> str:
        path = "/v1/locks/" + encode_component(v.identifier("key", key))
        return path + "/" + action if action else path

    @staticmethod
    def _holder_body(holder: Lock) -> dict[str, Any]:
        if not isinstance(holder, Lock) or holder.owner is None:
            raise InvalidArgumentError("holder", "must be the Lock that acquire_lock or renew_lock answered")
        return {"owner": holder.owner, "fence": holder.fence}

    def acquire_lock(self, key: str, owner: str, ttl_ms: int) -> Lock:
        """POST /v1/locks/{key}/acquire: held by ``owner`` for ``ttl_ms`` (1 ms to 1 day). Held by
        another: 409 lock_held (``expires_at``). The same owner again: the same fence, lease renewed."""
        body = {"owner": v.identifier("owner", owner), "ttl_ms": v.integer("ttl_ms", ttl_ms, 1, v.LEASE_TTL_MS_MAX)}
        return Lock.from_json(self._post(self._lock_path(key, "acquire"), body))

    def renew_lock(self, holder: Lock, ttl_ms: int) -> Lock:
        """POST /v1/locks/{key}/renew with the holder's owner and fence: 409 lock_lost if not the
        holder any more, 409 lock_cancelled if asked to stop (the lock is then free)."""
        body = self._holder_body(holder) | {"ttl_ms": v.integer("ttl_ms", ttl_ms, 1, v.LEASE_TTL_MS_MAX)}
        return Lock.from_json(self._post(self._lock_path(holder.key, "renew"), body))

    def release_lock(self, holder: Lock) -> Lock:
        """POST /v1/locks/{key}/release: the lock is free. 409 lock_lost if not the holder (also what
        a resend reports when the lost first attempt released it)."""
        return Lock.from_json(self._post(self._lock_path(holder.key, "release"), self._holder_body(holder)))

    def cancel_lock(self, key: str) -> Lock:
        """POST /v1/locks/{key}/cancel: ask the holder to stop (its next renew: lock_cancelled)."""
        return Lock.from_json(self._post(self._lock_path(key, "cancel"), {}))

    def get_lock(self, key: str) -> Lock:
        """GET /v1/locks/{key}: 404 if the key was never used."""
        return Lock.from_json(self._get(self._lock_path(key)))

    # --- idempotency keys (admin) ---------------------------------------------------------------

    @staticmethod
    def _idempotency_path(key: str, action: str) -> str:
        return f"/v1/idempotency/{encode_component(v.identifier('key', key))}/{action}"

    def begin_idempotency(self, key: str, fingerprint: str, ttl_ms: int) -> IdempotencyKey:
        """POST /v1/idempotency/{key}/begin: ``state`` started (go ahead) or finished (use
        ``response``); 409 in_progress while another claim is live. Not resent once it may have
        arrived (a resend would meet its own claim: in_progress)."""
        body = {"fingerprint": v.fingerprint(fingerprint), "ttl_ms": v.integer("ttl_ms", ttl_ms, 1, v.LEASE_TTL_MS_MAX)}
        return IdempotencyKey.from_json(self._post(self._idempotency_path(key, "begin"), body,
                                                   resend=Resend.ONLY_IF_UNSENT))

    def finish_idempotency(self, key: str, fingerprint: str, response: Any, *,
                           attempt: int | None = None) -> IdempotencyKey:
        """POST /v1/idempotency/{key}/finish: store ``response`` (any JSON value but None) to replay."""
        if response is None:
            raise InvalidArgumentError("response", "must be a JSON value other than null")
        body: dict[str, Any] = {"fingerprint": v.fingerprint(fingerprint), "response": v.json_value("response", response)}
        if attempt is not None:
            body["attempt"] = v.integer("attempt", attempt, 1, 2**63 - 1)
        return IdempotencyKey.from_json(self._post(self._idempotency_path(key, "finish"), body))

    def abandon_idempotency(self, key: str, fingerprint: str, *, attempt: int | None = None) -> IdempotencyKey:
        """POST /v1/idempotency/{key}/abandon: give the claim back after a failure that did nothing."""
        body: dict[str, Any] = {"fingerprint": v.fingerprint(fingerprint)}
        if attempt is not None:
            body["attempt"] = v.integer("attempt", attempt, 1, 2**63 - 1)
        return IdempotencyKey.from_json(self._post(self._idempotency_path(key, "abandon"), body))

    # --- rate limits (admin) --------------------------------------------------------------------

    def check_ratelimit(self, policy: str, key: str, *, cost: int | None = None) -> RateLimitDecision:
        """POST /v1/ratelimits/{policy}/check: allowed, or RateLimitedError (429, retry_after_ms).
        Not resent once it may have arrived (every check counts)."""
        body: dict[str, Any] = {"key": v.identifier("key", key)}
        if cost is not None:
            body["cost"] = v.integer("cost", cost, 1, v.AMOUNT_MAX)
        path = f"/v1/ratelimits/{encode_component(v.identifier('policy', policy))}/check"
        return RateLimitDecision.from_json(self._post(path, body, resend=Resend.ONLY_IF_UNSENT))

    def reset_ratelimit(self, policy: str, key: str) -> RateLimitReset:
        """POST /v1/ratelimits/{policy}/reset: the key has its full budget again."""
        path = f"/v1/ratelimits/{encode_component(v.identifier('policy', policy))}/reset"
        return RateLimitReset.from_json(self._post(path, {"key": v.identifier("key", key)}))

    # --- operations -----------------------------------------------------------------------------

    def audit(self, *, account_id: str | None = None) -> Audit:
        """GET /v1/audit (admin): balances recomputed from the event log."""
        return Audit.from_json(self._get(target("/v1/audit", account_id=optional_id("account_id", account_id))))

    def healthz(self) -> str:
        """GET /healthz: ``"ok"`` while the process is up."""
        answer = self._get("/healthz")
        return str(answer.get("status")) if isinstance(answer, dict) else str(answer)

    def readyz(self) -> Readiness:
        """GET /readyz: ready (200) or not (503, answered as ``ready=False``, not retried)."""
        try:
            return Readiness.from_json(self._get("/readyz", resend=Resend.ONLY_IF_UNSENT), ready=True)
        except ProblemError as e:
            if e.status != 503 or e.body is None:
                raise
            return Readiness.from_json(e.body, ready=False)

    def metrics(self) -> str:
        """GET /metrics: the Prometheus text."""
        return str(self._get("/metrics"))

    def openapi(self) -> dict[str, Any]:
        """GET /openapi.json: the OpenAPI 3.1 document."""
        answer = self._get("/openapi.json")
        if not isinstance(answer, dict):
            raise TransportError("bad_response", "/openapi.json is not a JSON object", 1)
        return answer


def _endpoint_path(endpoint_id: str) -> str:
    return "/v1/webhook-endpoints/" + encode_component(v.server_id("endpoint_id", endpoint_id))


def _event_types(event_types: object) -> list[str]:
    """A list of event type names (the server checks them: unknown, empty or repeated ones: 400)."""
    if not isinstance(event_types, list) or not all(isinstance(t, str) for t in event_types):
        raise InvalidArgumentError("event_types", f"must be a list of event type names, not {event_types!r:.100}")
    return list(event_types)
