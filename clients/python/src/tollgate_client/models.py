"""Typed results of the tollgate client: one frozen dataclass per JSON shape of api.md.

Each ``from_json`` takes the server's decoded JSON object. Fields the server adds later are ignored
(so an older client keeps working); a field the contract requires that is missing raises
:class:`~tollgate_client.errors.TransportError` (``bad_response``). Money is ``int`` (credits, the
smallest unit); times are the server's RFC 3339 strings, unchanged.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from .errors import TransportError


class Model:
    """Base of the result types: ``from_json`` keeps the fields the class names, and builds the
    nested results its ``NESTED`` map names (a field holding a list gets a list of them)."""

    NESTED: ClassVar[dict[str, type[Model]]] = {}

    @classmethod
    def from_json(cls, obj: Any, **fixed: Any) -> Self:
        """Makes one from the server's JSON object; ``fixed`` sets fields the JSON does not hold."""
        if not isinstance(obj, dict):
            raise TransportError("bad_response", f"expected a JSON object for {cls.__name__}, got {obj!r:.200}", 1)
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in obj.items() if k in names}
        for name, model in cls.NESTED.items():
            value = obj.get(name)
            if isinstance(value, list):
                kwargs[name] = [model.from_json(item) for item in value]
            elif value is not None:
                kwargs[name] = model.from_json(value)
        kwargs.update(fixed)
        try:
            return cls(**kwargs)
        except TypeError as e:
            raise TransportError("bad_response", f"{cls.__name__}: {e}", 1) from e


@dataclass(frozen=True)
class Account(Model):
    """An account and its balances; ``available + reserved + used + expired == purchased`` always holds."""

    account_id: str
    available: int
    reserved: int
    used: int
    purchased: int
    overdraft_limit: int
    frozen: bool
    active_holds: int
    created_at: str
    expired: int = 0  # credits whose lot ran out unspent (0 from a server older than lots)
    max_active_holds: int | None = None
    oldest_active_hold_age_ms: int | None = None
    low_balance_threshold: int | None = None  # balance notices when available crosses it; None: none
    # Why a frozen account is frozen: "refund shortfall" (a payment's refund took back credits
    # already spent: open again once credits repay it) or "payment disputed" (an admin unfreezes it);
    # None when not frozen or frozen by an admin.
    frozen_reason: str | None = None


@dataclass(frozen=True)
class LotDraw(Model):
    """What a hold took from one credit lot."""

    lot_id: str
    amount: int


@dataclass(frozen=True)
class Lot(Model):
    """A credit lot (api.md, Credit lots): the credits of one credit, spent in order (lowest
    ``priority``, soonest ``expires_at``, oldest). ``available + reserved + used + expired ==
    amount``; ``status`` is ``active``, ``expired`` (``expires_at`` has passed) or ``spent``."""

    lot_id: str
    category: str  # "paid" | "promotional"
    priority: int
    amount: int
    available: int
    reserved: int
    used: int
    expired: int
    created_at: str
    status: str
    reference: str | None = None  # the credit's; None for the lot an upgrade made
    expires_at: str | None = None  # None: never expires


@dataclass(frozen=True)
class Hold(Model):
    """A reservation; ``status`` is ``active``, ``committed``, ``released`` or ``expired``.
    ``refunded_amount``: what refunds have given back of ``committed_amount`` (never more; 0 from a
    server older than refunds). ``lots``: its draw, what it took from each credit lot in draw order
    (what came from the overdraft is in none; empty from a server older than lots)."""

    NESTED = {"lots": LotDraw}

    hold_id: str
    account_id: str
    request_id: str
    amount: int
    committed_amount: int
    status: str
    created_at: str
    expires_at: str
    metadata: dict[str, Any] = field(default_factory=dict)
    closed_at: str | None = None
    late_outcome: str | None = None  # "charged" | "forgiven": a commit after expiry
    release_reason: str | None = None
    refunded_amount: int = 0
    lots: list[LotDraw] = field(default_factory=list)
    # A hold reserved by feature (api.md, Prices): the feature, the units reserved, the price it was
    # reserved at (frozen: a commit by quantity charges quantity × unit_price) and that price's
    # version. None on a hold reserved by amount, from servers older than prices, and in the answers
    # of a commit by amount, a release and an extend (get_hold shows them).
    feature: str | None = None
    quantity: int | None = None
    unit_price: int | None = None
    price_version: int | None = None


@dataclass(frozen=True)
class Event(Model):
    """An entry of the append-only log; ``event_id`` increases strictly with commit order."""

    event_id: int
    account_id: str
    type: str
    amount: int
    at: str
    available_after: int
    reserved_after: int
    used_after: int
    expired_after: int = 0
    hold_id: str | None = None
    job_id: str | None = None
    lot_id: str | None = None  # credited: the lot it made; lot_expired: the lot that expired
    reference: str | None = None
    reason: str | None = None
    settings: dict[str, Any] | None = None  # account_updated: the settings after the change


@dataclass(frozen=True)
class Transfer(Model):
    """The answer of a credit or a debit: its event and the account after it."""

    NESTED = {"event": Event, "account": Account}

    event: Event
    account: Account


@dataclass(frozen=True)
class TransferRecord(Model):
    """The credit or debit recorded under a reference (``kind``: ``credit`` or ``debit``)."""

    reference: str
    account_id: str
    kind: str
    amount: int
    event_id: int
    at: str


@dataclass(frozen=True)
class AccountPage(Model):
    NESTED = {"accounts": Account}

    accounts: list[Account]
    has_more: bool


@dataclass(frozen=True)
class LotPage(Model):
    NESTED = {"lots": Lot}

    lots: list[Lot]
    has_more: bool


@dataclass(frozen=True)
class Price(Model):
    """A feature's price (api.md, Prices): what one unit costs, in credits. ``version`` is 1 for the
    first price and goes up with each change; ``updated_at`` is when this version was set."""

    feature: str
    credits_per_unit: int
    version: int
    updated_at: str


@dataclass(frozen=True)
class PricePage(Model):
    """Every feature's current price, by feature ascending; page on with the last one's feature."""

    NESTED = {"prices": Price}

    prices: list[Price]
    has_more: bool


@dataclass(frozen=True)
class PriceVersionPage(Model):
    """A feature's prices, newest version first; page on with the last one's version."""

    NESTED = {"versions": Price}

    versions: list[Price]
    has_more: bool


@dataclass(frozen=True)
class HoldCheck(Model):
    """The decision a reservation would meet now (POST /v1/holds/check; nothing is written).
    ``requested``: the amount, or quantity × unit_price (then ``feature``, ``quantity`` and
    ``unit_price`` are set). ``allowed`` False: ``reason`` is the error code a reservation would be
    refused with (``insufficient_credits``, ``too_many_holds``, ``account_frozen``) and ``detail``
    its message."""

    allowed: bool
    account_id: str
    available: int
    requested: int
    feature: str | None = None
    quantity: int | None = None
    unit_price: int | None = None
    reason: str | None = None
    detail: str | None = None


@dataclass(frozen=True)
class HoldPage(Model):
    NESTED = {"holds": Hold}

    holds: list[Hold]
    has_more: bool


@dataclass(frozen=True)
class EventPage(Model):
    """Events oldest first; pass ``next_after`` as ``after`` to continue."""

    NESTED = {"events": Event}

    events: list[Event]
    next_after: int


@dataclass(frozen=True)
class NewKey(Model):
    """A key just made: ``secret`` is shown this once. ``scopes`` in the canonical order (account
    keys: ``holds:write``, ``jobs:write``, ``read``; admin keys: ``admin`` or ``admin:read``; empty
    from a server older than scopes); ``account_id`` None for an admin key."""

    key_id: str
    secret: str = field(repr=False)
    account_id: str | None = None
    created_at: str | None = None
    scopes: list[str] = field(default_factory=list)
    name: str | None = None
    expires_at: str | None = None  # None: never expires


@dataclass(frozen=True)
class KeyInfo(Model):
    """The calling key (GET /v1/key), never its secret. The configured admin key is ``key_id``
    ``"admin"``, ``scopes`` ``["admin"]``, ``created_at`` None."""

    key_id: str
    scopes: list[str]
    account_id: str | None = None  # None: an admin key
    name: str | None = None
    expires_at: str | None = None
    created_at: str | None = None


@dataclass(frozen=True)
class KeySummary(Model):
    """A key as listed: never its secret."""

    key_id: str
    kind: str  # "admin" | "account"
    created_at: str
    revoked: bool
    account_id: str | None = None
    last_used_at: str | None = None
    revoked_at: str | None = None
    scopes: list[str] = field(default_factory=list)  # empty from a server older than scopes
    name: str | None = None
    expires_at: str | None = None


@dataclass(frozen=True)
class KeyPage(Model):
    NESTED = {"keys": KeySummary}

    keys: list[KeySummary]
    has_more: bool


@dataclass(frozen=True)
class RevokedKey(Model):
    key_id: str
    revoked: bool


@dataclass(frozen=True)
class WebhookEndpoint(Model):
    """A webhook endpoint (api.md, Webhooks). ``secret`` is set only in the answer of the create and
    of a rotation (``whsec_`` + base64); reads never carry it. ``event_types`` / ``account_id`` None:
    every type, every account. ``status``: enabled, disabled."""

    endpoint_id: str
    url: str
    status: str
    created_at: str
    updated_at: str
    description: str = ""
    event_types: list[str] | None = None
    account_id: str | None = None
    previous_secret_expires_at: str | None = None
    # Every event the endpoint wants up to this event_id was sent at least once (None: a server older
    # than webhook delivery); failing_since: the first failed attempt since the last delivered one.
    delivery_cursor: int | None = None
    failing_since: str | None = None
    secret: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class WebhookEndpointPage(Model):
    NESTED = {"endpoints": WebhookEndpoint}

    endpoints: list[WebhookEndpoint]
    has_more: bool


@dataclass(frozen=True)
class WebhookDelivery(Model):
    """One event's delivery to one endpoint. ``status``: pending (the last attempt failed;
    ``next_attempt_at`` is the next one), delivered (answered 2xx), failed (every attempt failed; a
    replay sends it again). ``last_status_code`` None: no answer came; ``last_error``: why the last
    attempt failed, in words (None when delivered)."""

    webhook_id: str
    endpoint_id: str
    event_id: int
    event_type: str
    event_at: str
    status: str
    attempts: int
    created_at: str
    account_id: str | None = None
    last_attempt_at: str | None = None
    last_status_code: int | None = None
    last_error: str | None = None
    next_attempt_at: str | None = None


@dataclass(frozen=True)
class WebhookDeliveryPage(Model):
    NESTED = {"deliveries": WebhookDelivery}

    deliveries: list[WebhookDelivery]
    has_more: bool


@dataclass(frozen=True)
class DeletedWebhookEndpoint(Model):
    endpoint_id: str
    deleted: bool


@dataclass(frozen=True)
class Job(Model):
    """A paid call tollgate makes; ``status``: pending, running, completed, failed, cancelled."""

    client_request_id: str
    account_id: str
    cost: int
    provider: str
    status: str
    hold_id: str
    attempts: int
    charged: bool
    created_at: str
    updated_at: str
    result: Any = None
    error: str | None = None
    refunded_amount: int | None = None  # only in refund_job's answer: what its hold has given back in all


@dataclass(frozen=True)
class JobPage(Model):
    NESTED = {"jobs": Job}

    jobs: list[Job]
    has_more: bool


@dataclass(frozen=True)
class JobHistoryEntry(Model):
    at: str
    kind: str
    detail: str
    attempt: int | None = None


@dataclass(frozen=True)
class JobHistory(Model):
    """A job's story, oldest first."""

    NESTED = {"entries": JobHistoryEntry}

    entries: list[JobHistoryEntry]


@dataclass(frozen=True)
class Lock(Model):
    """A lock as it is now; ``owner`` is None when free. Pass it to renew_lock and release_lock."""

    key: str
    fence: int
    held: bool
    cancelled: bool
    owner: str | None = None
    expires_at: str | None = None


@dataclass(frozen=True)
class IdempotencyKey(Model):
    """``state``: started (go ahead), finished (use ``response``), abandoned."""

    key: str
    state: str
    attempt: int
    expires_at: str | None = None
    response: Any = None
    finished_at: str | None = None
    resumed: bool | None = None


@dataclass(frozen=True)
class RateLimitDecision(Model):
    allowed: bool
    remaining: int
    reset_after_ms: int
    limit: int
    period_ms: int


@dataclass(frozen=True)
class RateLimitReset(Model):
    policy: str
    key: str
    reset: bool


@dataclass(frozen=True)
class AuditViolation(Model):
    account_id: str
    message: str


@dataclass(frozen=True)
class Audit(Model):
    """Balances recomputed from the event log; no violations means they agree."""

    NESTED = {"violations": AuditViolation}

    accounts_checked: int
    violations: list[AuditViolation]


@dataclass(frozen=True)
class Readiness(Model):
    """GET /readyz: ``ready`` is True on 200; ``database`` and ``reaper`` say what is wrong."""

    ready: bool
    status: str
    database: str | None = None
    reaper: str | None = None
