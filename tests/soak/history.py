"""The soak's history: every client operation with what the client observed, at the HTTP level.

An *operation* is one logical call with a client-chosen id (request_id, reference,
client_request_id…); its *attempts* are the HTTP exchanges made for it, all with the same body. Each
attempt is classified:

  ok        a 2xx answer
  refused   a definite 4xx answer (the server decided and said so: insufficient_credits,
            hold_released, lock_held, rate_limited, …)
  unknown   no answer (refused connection, reset, cut, time-out) or 5xx (500, 503 unavailable: api.md
            says such a request "has either fully happened or not at all")

and the operation gets the outcome the checker may rely on:

  ok        some attempt answered 2xx (its body is the result)
  refused   every attempt was a definite refusal — so nothing of it can take effect
  unknown   otherwise: no definite answer, or a refusal after an attempt that may still be in flight
            (a paused instance can apply a request after another instance refused its retry)

Thread safety: History.record may be called from any thread; the rest after the run.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

OPERATIONS_MAX = 2_000_000  # a bound on the history's size; a run past it stops recording and says so


@dataclass
class Attempt:
    instance: str
    status: int            # HTTP status, 0 for no answer
    error: str = ""        # why there was no answer, or the problem's code
    t0: float = 0.0
    t1: float = 0.0


@dataclass
class Operation:
    op: int
    kind: str
    worker: str
    args: dict[str, Any]
    outcome: str = "unknown"
    code: str = ""                  # the refusal's code
    result: dict[str, Any] | None = None
    attempts: list[Attempt] = field(default_factory=list)
    t_invoke: float = 0.0
    t_complete: float = 0.0

    def classify(self) -> None:
        kinds = [attempt_kind(a) for a in self.attempts]
        if "ok" in kinds:
            self.outcome = "ok"
        elif kinds and all(k == "refused" for k in kinds):
            self.outcome = "refused"
            self.code = self.attempts[-1].error
        else:
            self.outcome = "unknown"
            if kinds and kinds[-1] == "refused":
                self.code = self.attempts[-1].error


def attempt_kind(a: Attempt) -> str:
    if 200 <= a.status < 300:
        return "ok"
    if 400 <= a.status < 500:
        return "refused"
    return "unknown"


class History:
    def __init__(self, backend: str) -> None:
        self.backend = backend
        self._lock = threading.Lock()
        self._ops: list[Operation] = []
        self._next = 0
        self.truncated = False
        self.t0 = time.monotonic()

    def new_op(self, kind: str, worker: str, args: dict[str, Any]) -> Operation:
        with self._lock:
            self._next += 1
            return Operation(op=self._next, kind=kind, worker=worker, args=args)

    def record(self, op: Operation) -> None:
        with self._lock:
            if len(self._ops) >= OPERATIONS_MAX:
                self.truncated = True
                return
            self._ops.append(op)

    def operations(self) -> list[Operation]:
        with self._lock:
            return list(self._ops)

    def dump(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            for op in self.operations():
                f.write(json.dumps(asdict(op), separators=(",", ":")) + "\n")


def load(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
