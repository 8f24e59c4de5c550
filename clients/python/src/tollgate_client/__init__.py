"""tollgate_client — a Python client for tollgate's HTTP API (standard library only).

    from tollgate_client import Client, InsufficientCreditsError

    with Client("http://127.0.0.1:8080", key) as client:
        try:
            with client.hold("kiosk-1", 3, request_id="gen-1") as h:
                h.commit(2)
        except InsufficientCreditsError as e:
            print(e.detail)   # "Not enough credits: 1 available, 3 needed."

See README.md for the retry policy, time-outs and every call.
"""

from .client import UNCHANGED, Client
from .errors import (ForbiddenError, InsufficientCreditsError, InvalidArgumentError, NotFoundError, ProblemError,
                     RateLimitedError, RefundExceedsChargeError, TollgateError, TransportError, UnavailableError)
from .hold import HoldContext
from .models import (Account, AccountPage, Audit, AuditViolation, Event, EventPage, Hold, HoldCheck, HoldPage,
                     IdempotencyKey, Job, JobHistory, JobHistoryEntry, JobPage, KeyInfo, KeyPage, KeySummary, Lock, Lot, LotDraw,
                     LotPage, NewKey, Price, PricePage, PriceVersionPage, RateLimitDecision, RateLimitReset, Readiness,
                     RevokedKey, Transfer, TransferRecord, DeletedWebhookEndpoint, WebhookDelivery, WebhookDeliveryPage,
                     WebhookEndpoint, WebhookEndpointPage)
from .transport import CallInfo, RetryPolicy
from .version import __version__

__all__ = [
    "Account", "AccountPage", "Audit", "AuditViolation", "CallInfo", "Client", "Event", "EventPage", "ForbiddenError",
    "Hold", "HoldCheck",
    "HoldContext", "HoldPage", "IdempotencyKey", "InsufficientCreditsError", "InvalidArgumentError", "Job",
    "JobHistory", "JobHistoryEntry", "JobPage", "KeyInfo", "KeyPage", "KeySummary", "Lock", "Lot", "LotDraw", "LotPage",
    "NewKey", "NotFoundError", "Price", "PricePage", "PriceVersionPage",
    "ProblemError", "RateLimitDecision", "RateLimitReset", "RateLimitedError", "Readiness", "RefundExceedsChargeError",
    "RetryPolicy", "RevokedKey", "TollgateError", "Transfer", "TransferRecord", "TransportError", "UNCHANGED",
    "UnavailableError", "DeletedWebhookEndpoint", "WebhookDelivery", "WebhookDeliveryPage", "WebhookEndpoint",
    "WebhookEndpointPage", "__version__",
]
