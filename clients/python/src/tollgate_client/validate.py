"""Argument checks, run before anything is sent: a bad argument raises InvalidArgumentError.

The bounds are api.md's (and docs/openapi.json's): amounts are integers 1 ≤ amount ≤ 2^53−1,
client-chosen identifiers are 1–128 characters of ``[A-Za-z0-9._:@-]``. ``bool`` is refused where
an integer is wanted (``True`` is an ``int`` in Python, and never a meant amount).
"""

from __future__ import annotations

import datetime
import json
import re
from typing import Any

from .errors import InvalidArgumentError

AMOUNT_MAX = 2**53 - 1
ID_PATTERN = re.compile(r"[A-Za-z0-9._:@-]{1,128}")
PAGE_LIMIT_MAX = 1000
WAIT_MS_MAX = 60_000
LEASE_TTL_MS_MAX = 86_400_000  # locks and idempotency claims: at most a day
MAX_ACTIVE_HOLDS_MAX = 1_000_000_000
TEXT_LENGTH_MAX = 1024          # a release's, a debit's or a refund's reason
FINGERPRINT_BYTES_MAX = 256
HOLD_STATUSES = ("active", "committed", "released", "expired")
LOT_STATUSES = ("active", "expired", "spent")
LOT_CATEGORIES = ("paid", "promotional")
LOT_PRIORITY_MAX = 100  # 0 to 100, lower spent first
JOB_STATUSES = ("pending", "running", "completed", "failed", "cancelled")
DELIVERY_STATUSES = ("pending", "delivered", "failed")
ACCOUNT_SCOPES = ("holds:write", "jobs:write", "read")  # the canonical order
ADMIN_SCOPES = ("admin", "admin:read")
KEY_NAME_BYTES_MAX = 100
RFC3339_PATTERN = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


def integer(name: str, value: object, minimum: int, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(name, f"must be an integer, not {type(value).__name__} {value!r}")
    if not minimum <= value <= maximum:
        raise InvalidArgumentError(name, f"must be from {minimum} to {maximum}, not {value}")
    return value


def amount(name: str, value: object) -> int:
    return integer(name, value, 1, AMOUNT_MAX)


def identifier(name: str, value: object) -> str:
    if not isinstance(value, str) or ID_PATTERN.fullmatch(value) is None:
        raise InvalidArgumentError(name, f"must be 1-128 characters of A-Z a-z 0-9 . _ : @ -, not {value!r}")
    return value


def server_id(name: str, value: object) -> str:
    """An opaque id the server made (hold_id, key_id): any non-empty string, sent encoded."""
    if not isinstance(value, str) or not value or len(value) > 256:
        raise InvalidArgumentError(name, f"must be a non-empty string (at most 256 characters), not {value!r}")
    return value


def text(name: str, value: object, length_max: int = TEXT_LENGTH_MAX, length_min: int = 0) -> str:
    """A string of ``length_min`` to ``length_max`` characters (``length_min`` 1: required, not empty)."""
    if not isinstance(value, str) or not length_min <= len(value) <= length_max:
        bounds = f"at most {length_max}" if length_min == 0 else f"{length_min} to {length_max}"
        raise InvalidArgumentError(name, f"must be a string of {bounds} characters")
    return value


def fingerprint(value: object) -> str:
    if not isinstance(value, str) or not 1 <= len(value.encode()) <= FINGERPRINT_BYTES_MAX:
        raise InvalidArgumentError("fingerprint", f"must be a string of 1-{FINGERPRINT_BYTES_MAX} bytes")
    return value


def one_of(name: str, value: object, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise InvalidArgumentError(name, f"must be one of {', '.join(choices)}, not {value!r}")
    assert isinstance(value, str)
    return value


def boolean(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgumentError(name, f"must be True or False, not {value!r}")
    return value


def json_value(name: str, value: object, *, must_be_object: bool = False) -> Any:
    """Any value json can serialize (finite numbers only); an object (dict) if asked."""
    if must_be_object and not isinstance(value, dict):
        raise InvalidArgumentError(name, f"must be a dict (a JSON object), not {type(value).__name__}")
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError(name, f"is not JSON: {e}") from e
    return value


def page_limit(value: object) -> int:
    return integer("limit", value, 1, PAGE_LIMIT_MAX)


def scopes(value: object, allowed: tuple[str, ...]) -> list[str]:
    """A non-empty list of distinct scopes, each one of ``allowed``."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value:
        raise InvalidArgumentError("scopes", f"must be a non-empty list of {', '.join(allowed)}, not {value!r}")
    seen: list[str] = []
    for scope in value:
        if scope not in allowed:
            raise InvalidArgumentError("scopes", f"must each be one of {', '.join(allowed)}, not {scope!r}")
        if scope in seen:
            raise InvalidArgumentError("scopes", f"{scope!r} is given twice")
        seen.append(scope)
    return seen


def timestamp(name: str, value: object) -> str:
    """An RFC 3339 string as given, or an aware datetime as RFC 3339 UTC with milliseconds."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise InvalidArgumentError(name, "must be a timezone-aware datetime (e.g. datetime.now(timezone.utc))")
        utc = value.astimezone(datetime.timezone.utc)
        return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"
    if not isinstance(value, str) or RFC3339_PATTERN.fullmatch(value) is None:
        raise InvalidArgumentError(name, f"must be an RFC 3339 time such as 2027-01-31T12:00:00Z, not {value!r}")
    return value


def key_name(value: object) -> str:
    if not isinstance(value, str) or not 1 <= len(value.encode()) <= KEY_NAME_BYTES_MAX:
        raise InvalidArgumentError("name", f"must be a string of 1-{KEY_NAME_BYTES_MAX} bytes")
    return value
