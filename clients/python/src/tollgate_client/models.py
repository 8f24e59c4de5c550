"""Typed results of the tollgate client: one frozen dataclass per JSON shape of api.md.

Each ``from_json`` takes the server's decoded JSON object. Fields the server adds later are ignored
(so an older client keeps working); a field the contract requires that is missing raises
:class:`~tollgate_client.errors.TransportError` (``bad_response``). Money is ``int`` (credits, the
smallest unit); times are the server's RFC 3339 strings, unchanged.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .errors import TransportError

T = TypeVar("T")


def build(cls: type[T], obj: Any, **nested: Any) -> T:
    """Makes a ``cls`` from the fields of ``obj`` that it names; ``nested`` overrides fields."""
    if not isinstance(obj, dict):
        raise TransportError("bad_response", f"expected a JSON object for {cls.__name__}, got {obj!r:.200}", 1)
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs = {k: v for k, v in obj.items() if k in names}
    kwargs.update(nested)
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise TransportError("bad_response", f"{cls.__name__}: {e}", 1) from e


def items(obj: Any, key: str) -> list[Any]:
    value = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(value, list):
        raise TransportError("bad_response", f"expected a list under {key!r}", 1)
    return value


@dataclass(frozen=True)
class Account:
    """An account and its balances; ``available + reserved + used == purchased`` always holds."""

    account_id: str
    available: int
    reserved: int
    used: int
    purchased: int
    overdraft_limit: int
    frozen: bool
    active_holds: int
    created_at: str
    max_active_holds: int | None = None
    oldest_active_hold_age_ms: int | None = None

    @classmethod
    def from_json(cls, obj: Any) -> Account:
        return build(cls, obj)


@dataclass(frozen=True)
class Hold:
    """A reservation; ``status`` is ``active``, ``committed``, ``released`` or ``expired``."""

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

    @classmethod
    def from_json(cls, obj: Any) -> Hold:
        return build(cls, obj)


@dataclass(frozen=True)
class Event:
    """An entry of the append-only log; ``event_id`` increases strictly with commit order."""

    event_id: int
    account_id: str
    type: str
    amount: int
    at: str
    available_after: int
    reserved_after: int
    used_after: int
    hold_id: str | None = None
    job_id: str | None = None
    reference: str | None = None
    reason: str | None = None
    settings: dict[str, Any] | None = None  # account_updated: the settings after the change

    @classmethod
    def from_json(cls, obj: Any) -> Event:
        return build(cls, obj)


@dataclass(frozen=True)
class Transfer:
    """The answer of a credit or a debit: its event and the account after it."""

    event: Event
    account: Account

    @classmethod
    def from_json(cls, obj: Any) -> Transfer:
        return build(cls, obj, event=Event.from_json(obj.get("event")), account=Account.from_json(obj.get("account")))


@dataclass(frozen=True)
class TransferRecord:
    """The credit or debit recorded under a reference (``kind``: ``credit`` or ``debit``)."""

    reference: str
    account_id: str
    kind: str
    amount: int
    event_id: int
    at: str

    @classmethod
    def from_json(cls, obj: Any) -> TransferRecord:
        return build(cls, obj)


@dataclass(frozen=True)
class AccountPage:
    accounts: list[Account]
    has_more: bool

    @classmethod
    def from_json(cls, obj: Any) -> AccountPage:
        return build(cls, obj, accounts=[Account.from_json(a) for a in items(obj, "accounts")])


@dataclass(frozen=True)
class HoldPage:
    holds: list[Hold]
    has_more: bool

    @classmethod
    def from_json(cls, obj: Any) -> HoldPage:
        return build(cls, obj, holds=[Hold.from_json(h) for h in items(obj, "holds")])


@dataclass(frozen=True)
class EventPage:
    """Events oldest first; pass ``next_after`` as ``after`` to continue."""

    events: list[Event]
    next_after: int

    @classmethod
    def from_json(cls, obj: Any) -> EventPage:
        return build(cls, obj, events=[Event.from_json(e) for e in items(obj, "events")])


@dataclass(frozen=True)
class NewKey:
    """A key just made: ``secret`` is shown this once."""

    key_id: str
    secret: str = field(repr=False)
    account_id: str | None = None
    created_at: str | None = None

    @classmethod
    def from_json(cls, obj: Any) -> NewKey:
        return build(cls, obj)


@dataclass(frozen=True)
class KeySummary:
    """A key as listed: never its secret."""

    key_id: str
    kind: str  # "admin" | "account"
    created_at: str
    revoked: bool
    account_id: str | None = None
    last_used_at: str | None = None
    revoked_at: str | None = None

    @classmethod
    def from_json(cls, obj: Any) -> KeySummary:
        return build(cls, obj)


@dataclass(frozen=True)
class KeyPage:
    keys: list[KeySummary]
    has_more: bool

    @classmethod
    def from_json(cls, obj: Any) -> KeyPage:
        return build(cls, obj, keys=[KeySummary.from_json(k) for k in items(obj, "keys")])


@dataclass(frozen=True)
class RevokedKey:
    key_id: str
    revoked: bool

    @classmethod
    def from_json(cls, obj: Any) -> RevokedKey:
        return build(cls, obj)


@dataclass(frozen=True)
class Job:
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

    @classmethod
    def from_json(cls, obj: Any) -> Job:
        return build(cls, obj)


@dataclass(frozen=True)
class JobPage:
    jobs: list[Job]
    has_more: bool

    @classmethod
    def from_json(cls, obj: Any) -> JobPage:
        return build(cls, obj, jobs=[Job.from_json(j) for j in items(obj, "jobs")])


@dataclass(frozen=True)
class JobHistoryEntry:
    at: str
    kind: str
    detail: str
    attempt: int | None = None

    @classmethod
    def from_json(cls, obj: Any) -> JobHistoryEntry:
        return build(cls, obj)


@dataclass(frozen=True)
class JobHistory:
    """A job's story, oldest first."""

    entries: list[JobHistoryEntry]

    @classmethod
    def from_json(cls, obj: Any) -> JobHistory:
        return build(cls, obj, entries=[JobHistoryEntry.from_json(e) for e in items(obj, "entries")])


@dataclass(frozen=True)
class Lock:
    """A lock as it is now; ``owner`` is None when free. Pass it to renew_lock and release_lock."""

    key: str
    fence: int
    held: bool
    cancelled: bool
    owner: str | None = None
    expires_at: str | None = None

    @classmethod
    def from_json(cls, obj: Any) -> Lock:
        return build(cls, obj)


@dataclass(frozen=True)
class IdempotencyKey:
    """``state``: started (go ahead), finished (use ``response``), abandoned."""

    key: str
    state: str
    attempt: int
    expires_at: str | None = None
    response: Any = None
    finished_at: str | None = None
    resumed: bool | None = None

    @classmethod
    def from_json(cls, obj: Any) -> IdempotencyKey:
        return build(cls, obj)


@dataclass(frozen=True)
class RateLimitDecision:
    allowed: bool
    remaining: int
    reset_after_ms: int
    limit: int
    period_ms: int

    @classmethod
    def from_json(cls, obj: Any) -> RateLimitDecision:
        return build(cls, obj)


@dataclass(frozen=True)
class RateLimitReset:
    policy: str
    key: str
    reset: bool

    @classmethod
    def from_json(cls, obj: Any) -> RateLimitReset:
        return build(cls, obj)


@dataclass(frozen=True)
class AuditViolation:
    account_id: str
    message: str

    @classmethod
    def from_json(cls, obj: Any) -> AuditViolation:
        return build(cls, obj)


@dataclass(frozen=True)
class Audit:
    """Balances recomputed from the event log; no violations means they agree."""

    accounts_checked: int
    violations: list[AuditViolation]

    @classmethod
    def from_json(cls, obj: Any) -> Audit:
        return build(cls, obj, violations=[AuditViolation.from_json(v) for v in items(obj, "violations")])


@dataclass(frozen=True)
class Readiness:
    """GET /readyz: ``ready`` is True on 200; ``database`` and ``reaper`` say what is wrong."""

    ready: bool
    status: str
    database: str | None = None
    reaper: str | None = None

    @classmethod
    def from_json(cls, obj: Any, ready: bool) -> Readiness:
        return build(cls, obj, ready=ready)
