"""One keep-alive HTTP/1.1 connection to a tollgate server, and the retry policy.

The policy is the same in every tollgate client; docs/reference/retries.md states it once. In short:

- **What is retried**: a failed connect (refused, unreachable, no connection in time), a time-out,
  a lost connection, and an answer 502, 503 or 504 (a balancer whose upstreams restart, a server
  that lost its database). The request is sent again with exactly the same method, path and body
  bytes — hence the same ``request_id``, ``reference``, ``client_request_id`` or hold id, which
  the server deduplicates.
- **Which calls**: those that carry such an id or do the same when sent twice
  (:attr:`Resend.SAFE`). Calls without one (:attr:`Resend.ONLY_IF_UNSENT`: extend, create_key,
  begin_idempotency, check_ratelimit) are sent again only when they certainly never reached the
  server (the connect failed); a time-out, a lost connection or a 502/503/504 is reported at once.
- **Back-off**: before attempt n+1 the client waits a random time between half and all of
  ``backoff_initial_ms × 2^(n−1)`` (capped at ``backoff_max_ms``); a ``Retry-After`` header (or a
  problem document's ``retry_after_ms``) raises the wait to it.
- **Budget**: no wait is started that would end more than ``budget_ms`` after the call began (and
  no more than ``attempts_max`` attempts are made); the last answer or failure is then reported.
  An attempt under way is bounded by its own time-outs, so the worst case of one call is
  ``budget_ms`` plus one attempt's time-outs.
- **409 insufficient_credits on reserve**: asked once more at once (same body), then reported. No
  back-off: an empty balance does not refill by waiting.
- **Every other 4xx, and 500**: reported at once — the request must change, not be repeated.
- A kept-alive connection that the server closed while it sat idle is noticed when a request on it
  fails before any byte of an answer came; the request is then sent once more at once on a new
  connection, without counting as an attempt.

Time-outs, per attempt: ``connect_timeout_ms`` bounds opening the TCP connection (name resolution
is the system resolver's); ``request_timeout_ms`` bounds each wait for bytes while the request is
sent and its answer read (a server that trickles bytes can take longer in all).

Not thread-safe: one Transport (one Client) per thread. ``sleep`` and ``random`` are passed in so
that tests can see the waits.
"""

from __future__ import annotations

import enum
import http.client
import json
import random
import secrets
import socket
import ssl
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .version import __version__
from .errors import PROBLEM_CLASSES, InvalidArgumentError, ProblemError, TransportError, UnavailableError

ANSWER_TEXT_IN_DETAIL_MAX = 200


RETRYABLE_STATUSES = (502, 503, 504)


@dataclass(frozen=True)
class RetryPolicy:
    """How failed calls are repeated (see the module's docstring and docs/reference/retries.md)."""

    budget_ms: int = 10_000                     # no wait ends later than this after the call began
    attempts_max: int = 20                      # the first attempt included; 1: never repeat
    backoff_initial_ms: int = 100               # the wait before the 2nd attempt (at most), doubled after
    backoff_max_ms: int = 2000                  # the back-off's cap (a Retry-After may ask for more)
    retry_insufficient_credits_once: bool = True

    def check(self) -> None:
        if isinstance(self.attempts_max, bool) or not isinstance(self.attempts_max, int) or self.attempts_max < 1:
            raise InvalidArgumentError("retry.attempts_max", "must be an integer of at least 1")
        for name in ("budget_ms", "backoff_initial_ms", "backoff_max_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidArgumentError(f"retry.{name}", "must be an integer of at least 0")
        if not isinstance(self.retry_insufficient_credits_once, bool):
            raise InvalidArgumentError("retry.retry_insufficient_credits_once", "must be True or False")


class Resend(enum.Enum):
    """Whether a call may be sent again after it may already have reached the server."""

    SAFE = "safe"                      # carries an id (or is a read): the same effect when sent twice
    ONLY_IF_UNSENT = "only_if_unsent"  # no such id: repeat only when the connect failed


@dataclass(frozen=True)
class CallInfo:
    """How the last call ended: the final HTTP status (0: no answer) and the attempts it took."""

    status: int
    attempts: int


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int
    host_header: str
    tls: bool = False


def parse_base_url(base_url: str) -> Endpoint:
    """``http://host:port`` or ``https://host:port`` (port 80 or 443 by default, a trailing "/"
    allowed); nothing else."""
    def bad(why: str) -> InvalidArgumentError:
        return InvalidArgumentError("base_url", f"{base_url!r}: {why}")

    if not isinstance(base_url, str):
        raise bad("must be a string")
    parts = urllib.parse.urlsplit(base_url)
    if parts.scheme not in ("http", "https"):
        raise bad("not an absolute URL like http://127.0.0.1:8080 or https://tollgate.example:8443")
    if parts.username is not None or parts.password is not None:
        raise bad("user info is not supported; pass the key separately")
    if parts.path not in ("", "/"):
        raise bad("a path is not supported; give http://host:port")
    if parts.query or parts.fragment or base_url.endswith(("?", "#")):
        raise bad("a query or fragment is not supported")
    if not parts.hostname:
        raise bad("the host is missing")
    try:
        port = (443 if parts.scheme == "https" else 80) if parts.port is None else parts.port
    except ValueError as e:
        raise bad(f"the port must be 1-65535 ({e})") from e
    if port == 0:
        raise bad("the port must be 1-65535")
    return Endpoint(parts.hostname, port, parts.netloc, tls=parts.scheme == "https")


@dataclass(frozen=True)
class Answer:
    status: int
    reason: str
    headers: http.client.HTTPMessage
    body: bytes


class AttemptFailure(Exception):
    """One attempt got no HTTP answer; ``maybe_delivered``: the server may have seen the request."""

    def __init__(self, failure: str, message: str, maybe_delivered: bool) -> None:
        super().__init__(message)
        self.failure = failure
        self.message = message
        self.maybe_delivered = maybe_delivered


def new_request_id(prefix: str) -> str:
    """``prefix`` followed by 16 hex digits (64 bits from the OS's random source)."""
    return prefix + secrets.token_hex(8)


def encode_component(text: str) -> str:
    """Percent-encodes one path segment or query value (unreserved characters, ':' and '@' stay)."""
    if text in (".", ".."):
        return "".join(f"%{b:02X}" for b in text.encode())
    return urllib.parse.quote(text, safe=":@")


def retry_after_ms_of(headers: http.client.HTTPMessage) -> int | None:
    value = headers.get("Retry-After")
    if value is None or not value.isdigit() or len(value) > 6:
        return None
    return int(value) * 1000


def optional_int(document: dict[str, Any], key: str) -> int | None:
    value = document.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def to_problem(answer: Answer, attempts: int) -> ProblemError:
    """Decodes a non-2xx answer (a problem document, or whatever a proxy sent)."""
    document: dict[str, Any] | None = None
    try:
        parsed = json.loads(answer.body)
        if isinstance(parsed, dict):
            document = parsed
    except ValueError:
        pass
    doc = document or {}
    code = doc.get("code") if isinstance(doc.get("code"), str) and doc.get("code") else f"http_{answer.status}"
    title = doc.get("title") if isinstance(doc.get("title"), str) and doc.get("title") else answer.reason
    detail = doc.get("detail") if isinstance(doc.get("detail"), str) else None
    if not detail:
        text = answer.body[:ANSWER_TEXT_IN_DETAIL_MAX].decode("utf-8", "replace").replace("\n", " ")
        detail = text or answer.reason
    retry_after_ms = optional_int(doc, "retry_after_ms")
    if retry_after_ms is None:
        retry_after_ms = retry_after_ms_of(answer.headers)
    expires_at = doc.get("expires_at") if isinstance(doc.get("expires_at"), str) else None
    missing_scope = doc.get("missing_scope") if isinstance(doc.get("missing_scope"), str) else None
    cls = PROBLEM_CLASSES.get(str(code), ProblemError)
    if cls is ProblemError and answer.status in RETRYABLE_STATUSES:
        cls = UnavailableError  # a balancer's 502/504 (or a 503 that is no problem document)
    return cls(status=answer.status, code=str(code), title=str(title), detail=str(detail), attempts=attempts,
               available=optional_int(doc, "available"), requested=optional_int(doc, "requested"),
               retry_after_ms=retry_after_ms, expires_at=expires_at, missing_scope=missing_scope, body=document)


class Transport:
    """Sends calls over one kept-alive connection, applying the retry policy."""

    def __init__(self, base_url: str, key: str | None, *, connect_timeout_ms: int, request_timeout_ms: int,
                 retry: RetryPolicy, sleep: Callable[[float], None] = time.sleep,
                 random_fraction: Callable[[], float] = random.random,
                 tls_context: ssl.SSLContext | None = None) -> None:
        self.endpoint = parse_base_url(base_url)
        if tls_context is not None and not isinstance(tls_context, ssl.SSLContext):
            raise InvalidArgumentError("tls_context", "must be an ssl.SSLContext or None")
        if tls_context is not None and not self.endpoint.tls:
            raise InvalidArgumentError("tls_context", "is for an https base_url; this one is http")
        # https: the certificate and the host name are always checked (the default context's
        # settings); a private CA is given with ssl.create_default_context(cafile=...).
        self.tls_context = (tls_context or ssl.create_default_context()) if self.endpoint.tls else None
        if key is not None and (not isinstance(key, str) or not key or any(c in key for c in "\r\n")):
            raise InvalidArgumentError("key", "must be a non-empty string on one line, or None")
        for name, value in (("connect_timeout_ms", connect_timeout_ms), ("request_timeout_ms", request_timeout_ms)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgumentError(name, "must be an integer of at least 1")
        if not isinstance(retry, RetryPolicy):
            raise InvalidArgumentError("retry", "must be a RetryPolicy")
        retry.check()
        self.key = key
        self.connect_timeout_ms = connect_timeout_ms
        self.request_timeout_ms = request_timeout_ms
        self.retry = retry
        self.sleep = sleep
        self.random_fraction = random_fraction
        self.last_call: CallInfo | None = None
        self._conn: http.client.HTTPConnection | None = None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _connect(self) -> http.client.HTTPConnection:
        e = self.endpoint
        conn: http.client.HTTPConnection
        if self.tls_context is not None:
            conn = http.client.HTTPSConnection(e.host, e.port, timeout=self.connect_timeout_ms / 1000,
                                               context=self.tls_context)
        else:
            conn = http.client.HTTPConnection(e.host, e.port, timeout=self.connect_timeout_ms / 1000)
        try:
            conn.connect()
        except socket.gaierror as err:
            raise AttemptFailure("resolve", f"resolve {e.host}: {err}", maybe_delivered=False) from err
        except ssl.SSLCertVerificationError as err:
            raise AttemptFailure("tls", f"TLS with {e.host_header}: the server's certificate was refused: "
                                 f"{err.verify_message}", maybe_delivered=False) from err
        except ssl.SSLError as err:
            raise AttemptFailure("tls", f"TLS with {e.host_header}: the handshake failed: {err.reason or err}",
                                 maybe_delivered=False) from err
        except TimeoutError as err:
            raise AttemptFailure("connect", f"connect to {e.host_header}: no connection within "
                                 f"{self.connect_timeout_ms} ms", maybe_delivered=False) from err
        except OSError as err:
            raise AttemptFailure("connect", f"connect to {e.host_header}: {err}", maybe_delivered=False) from err
        assert conn.sock is not None
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._conn = conn
        return conn

    def _failure(self, err: BaseException, timeout_ms: int) -> AttemptFailure:
        where = self.endpoint.host_header
        if isinstance(err, TimeoutError):
            return AttemptFailure("timeout", f"no answer from {where} within {timeout_ms} ms", True)
        if isinstance(err, (ConnectionError, http.client.IncompleteRead)):
            return AttemptFailure("connection_lost", f"connection to {where} lost: {err!r}", True)
        if isinstance(err, http.client.HTTPException):
            return AttemptFailure("bad_response", f"bad answer from {where}: {err!r}", True)
        return AttemptFailure("connection_lost", f"connection to {where} lost: {err!r}", True)

    def _exchange(self, method: str, target: str, headers: dict[str, str], payload: bytes | None,
                  timeout_ms: int) -> Answer:
        """One attempt: (re)connects if needed, sends the request, reads the whole answer."""
        for stale_resend in (False, True):
            conn = self._conn
            reused = conn is not None and conn.sock is not None
            if conn is None or conn.sock is None:
                conn = self._connect()
            assert conn.sock is not None
            conn.sock.settimeout(timeout_ms / 1000)
            try:
                conn.request(method, target, body=payload, headers=headers)
                response = conn.getresponse()
            except (OSError, http.client.HTTPException) as err:
                self.close()
                closed_by_peer = isinstance(err, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError))
                if reused and closed_by_peer and not stale_resend:
                    continue  # the server closed the idle connection: once more on a new one
                raise self._failure(err, timeout_ms) from err
            try:
                body = response.read()
            except (OSError, http.client.HTTPException) as err:
                self.close()
                raise self._failure(err, timeout_ms) from err
            if response.will_close:
                self.close()
            return Answer(response.status, response.reason, response.headers, body)
        raise AssertionError("unreachable")

    def call(self, method: str, target: str, body: Any = None, *, has_body: bool = False,
             resend: Resend = Resend.SAFE, retry_insufficient_credits: bool = False,
             timeout_extra_ms: int = 0, retry: RetryPolicy | None = None) -> Any:
        """Sends one logical call; answers the parsed JSON of its 2xx answer (the text when the
        answer is not JSON). Raises ProblemError or TransportError after the policy's retries.
        ``retry`` replaces the transport's policy for this call."""
        # The request is built once: every attempt sends exactly these bytes.
        headers = {"User-Agent": f"tollgate-python/{__version__}", "Accept": "application/json",
                   "X-Request-Id": new_request_id("py-")}  # one per logical call: joins the server's log lines
        if self.key is not None:
            headers["Authorization"] = f"Bearer {self.key}"
        payload: bytes | None = None
        if has_body:
            payload = json.dumps(body, separators=(",", ":"), allow_nan=False).encode()
            headers["Content-Type"] = "application/json"
        timeout_ms = self.request_timeout_ms + timeout_extra_ms

        policy = self.retry if retry is None else retry
        started = time.monotonic()
        backoff_ms = policy.backoff_initial_ms
        asked_again_for_credits = False
        attempt = 0

        def waited_before_next(retry_after_ms: int | None) -> bool:
            """Waits before the next attempt; False (no wait) when it is out of attempts or budget."""
            nonlocal backoff_ms
            if attempt >= policy.attempts_max:
                return False
            wait_ms = backoff_ms * (0.5 + 0.5 * self.random_fraction())  # half to all of it
            if retry_after_ms is not None:
                wait_ms = max(wait_ms, retry_after_ms)
            elapsed_ms = (time.monotonic() - started) * 1000
            if elapsed_ms + wait_ms > policy.budget_ms:
                return False
            self.sleep(wait_ms / 1000)
            backoff_ms = min(backoff_ms * 2, policy.backoff_max_ms)
            return True

        while True:
            attempt += 1
            try:
                answer = self._exchange(method, target, headers, payload, timeout_ms)
            except AttemptFailure as failure:
                may_resend = resend is Resend.SAFE or not failure.maybe_delivered
                # A refused certificate or a failed handshake is the same on every attempt.
                if may_resend and failure.failure != "tls" and waited_before_next(None):
                    continue
                self.last_call = CallInfo(0, attempt)
                raise TransportError(failure.failure, failure.message, attempt) from None
            self.last_call = CallInfo(answer.status, attempt)
            if 200 <= answer.status <= 299:
                return self._decode(answer, attempt)
            problem = to_problem(answer, attempt)
            if (answer.status in RETRYABLE_STATUSES and resend is Resend.SAFE
                    and waited_before_next(problem.retry_after_ms)):
                continue
            if (retry_insufficient_credits and policy.retry_insufficient_credits_once and not asked_again_for_credits
                    and problem.code == "insufficient_credits"):
                asked_again_for_credits = True
                continue
            raise problem

    @staticmethod
    def _decode(answer: Answer, attempt: int) -> Any:
        if "json" not in answer.headers.get("Content-Type", ""):
            return answer.body.decode("utf-8", "replace")
        try:
            return json.loads(answer.body)
        except ValueError as e:
            raise TransportError("bad_response", f"the {answer.status} answer is not valid JSON: {e}", attempt) from e
