"""The processes of a soak run: PostgreSQL (scripts/pg), `tollgate serve` instances, the fake provider,
and the nemesis that hurts them at seeded random moments.

Every process is started here and ended here by its own pid (never by name). Every wait is bounded.

Thread safety: Instance and Provider methods are called by the nemesis thread and by the main thread
at the end, never at once (the main thread stops the nemesis first).
"""

from __future__ import annotations

import http.client
import os
import random
import signal
import socket
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PG_SCRIPT = os.path.join(REPO, "scripts", "pg")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_status(port: int, path: str, timeout_s: float = 2.0) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        return resp.status
    except (OSError, http.client.HTTPException):
        return 0
    finally:
        conn.close()


class Postgres:
    def __init__(self, work_dir: str) -> None:
        self.dir = os.path.join(work_dir, "pg")
        os.makedirs(self.dir, exist_ok=True)
        os.chmod(work_dir, 0o755)
        os.chmod(self.dir, 0o755)
        self.port = 0

    def _run(self, cmd: str, timeout_s: float = 90) -> str:
        out = subprocess.run([PG_SCRIPT, cmd, self.dir], capture_output=True, text=True, timeout=timeout_s)
        if out.returncode != 0:
            raise RuntimeError(f"scripts/pg {cmd} failed: {out.stderr.strip()}")
        return out.stdout.strip()

    def start(self) -> None:
        uri = self._run("start")
        self.port = int(uri.rsplit(":", 1)[1].split("/")[0])

    def restart(self) -> None:
        self._run("restart")

    def crash(self) -> None:
        self._run("crash")

    def stop(self) -> None:
        try:
            self._run("stop")
        except (RuntimeError, subprocess.TimeoutExpired):
            pass


@dataclass
class Instance:
    name: str
    binary: str
    config_path: str
    log_path: str
    port: int
    proc: subprocess.Popen[bytes] | None = None
    paused: bool = False
    starts: int = 0
    unexpected_exits: list[str] = field(default_factory=list)

    def start(self) -> None:
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"--- start {self.starts}\n".encode())
            log.flush()
            self.proc = subprocess.Popen([self.binary, "serve", "--config", self.config_path],
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        self.paused = False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check_exit(self) -> None:
        """Notes an exit nobody asked for (a crash is a signal; an exit code is a refusal to start)."""
        if self.proc is not None and self.proc.poll() is not None:
            rc = self.proc.returncode
            self.unexpected_exits.append(f"{self.name} exited by itself with {'signal ' + str(-rc) if rc < 0 else 'code ' + str(rc)}")
            self.proc = None

    def kill9(self) -> None:
        if self.proc is not None:
            if self.paused:
                self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(timeout=30)
            self.proc = None
        self.paused = False

    def pause(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
            self.paused = True

    def resume(self) -> None:
        if self.proc is not None and self.paused:
            self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def terminate(self) -> None:
        if self.proc is None:
            return
        self.resume()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    def ready(self) -> bool:
        return self.alive() and not self.paused and http_status(self.port, "/readyz") == 200


@dataclass
class Provider:
    """`tollgate fake-provider` with failing, lost, late and never-received answers (seeded)."""

    binary: str
    seed: int
    log_path: str
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    paused: bool = False

    def start(self) -> None:
        if self.port == 0:
            self.port = free_port()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [self.binary, "fake-provider", "--listen", f"127.0.0.1:{self.port}", "--seed", str(self.seed),
                 "--latency-ms", "1000..4000", "--time-scale", "10", "--fail-rate", "0.1",
                 "--lost-answer-rate", "0.1", "--late-answer-rate", "0.1", "--late-extra-ms", "20000",
                 "--never-received-rate", "0.05"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + 20
        while http_status(self.port, "/healthz") != 200:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("the fake provider did not start (see " + self.log_path + ")")
            time.sleep(0.05)
        self.paused = False

    def kill9(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=30)
            self.proc = None

    def pause(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGSTOP)
            self.paused = True

    def resume(self) -> None:
        if self.proc is not None and self.paused:
            self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def terminate(self) -> None:
        if self.proc is not None:
            self.resume()
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
            self.proc = None


class Nemesis:
    """Hurts the cluster at seeded random moments, one fault at a time, until stopped (see _deck).

    Faults: kill9 (an instance killed, restarted 0.2–2 s later), pause (SIGSTOP longer than every hold
    TTL and lock lease, then SIGCONT), pg_restart, pg_crash (immediate shutdown, restarted 0.5–2 s
    later), db_cut (every connection to PostgreSQL reset at once), provider_pause (SIGSTOP 1–4 s: it
    answers late), provider_kill (kill -9 and restart: it forgets every job). An instance that exits by
    itself is restarted and noted (Instance.unexpected_exits)."""

    def __init__(self, seed: int, instances: list[Instance], pg: Postgres | None, provider: Provider | None,
                 db_proxy_cut: Callable[[], None] | None, interval_s: tuple[float, float],
                 pause_s: tuple[float, float], log: Callable[[str], None]) -> None:
        self.rng = random.Random(f"{seed}:nemesis")
        self.instances = instances
        self.pg = pg
        self.provider = provider
        self.db_proxy_cut = db_proxy_cut
        self.interval_s = interval_s
        self.pause_s = pause_s
        self.log = log
        self.counts: Counter[str] = Counter()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self.errors: list[str] = []

    def _actions(self) -> list[tuple[str, int]]:
        acts = [("kill9", 4), ("pause", 3)]
        if self.pg is not None:
            acts += [("pg_restart", 2), ("pg_crash", 1), ("db_cut", 3)]
        if self.provider is not None:
            acts += [("provider_pause", 2), ("provider_kill", 1)]
        return acts

    def _sleep(self, seconds: float) -> None:
        self.stop.wait(seconds)  # a stop cuts a wait short; the fault's own undo still runs

    def _deck(self) -> list[str]:
        """The next faults, shuffled: a deck with every kind as often as its weight says. The first deck
        has each kind once, so that even a short run (CI's) meets every kind."""
        acts = self._actions()
        first = not self.counts and not self.errors
        deck = [name for name, weight in acts for _ in range(1 if first else weight)]
        self.rng.shuffle(deck)
        return deck

    def _run(self) -> None:
        deck: list[str] = []
        for _ in range(100_000):
            self._sleep(self.rng.uniform(*self.interval_s))
            for inst in self.instances:
                if inst.proc is not None:
                    inst.check_exit()
                if inst.proc is None and not self.stop.is_set():
                    inst.start()
            if self.stop.is_set():
                return
            if not deck:
                deck = self._deck()
            action = deck.pop()
            try:
                self._do(action)
                self.counts[action] += 1
            except Exception as e:  # noqa: BLE001 — a failed fault is reported, the run goes on
                self.errors.append(f"{action}: {e}")
                self.log(f"nemesis: {action} failed: {e}")

    def _do(self, action: str) -> None:
        r = self.rng
        if action == "kill9":
            inst = r.choice(self.instances)
            self.log(f"nemesis: kill -9 {inst.name}")
            inst.kill9()
            self._sleep(r.uniform(0.2, 2.0))
            inst.start()
        elif action == "pause":
            inst = r.choice(self.instances)
            seconds = r.uniform(*self.pause_s)
            self.log(f"nemesis: SIGSTOP {inst.name} for {seconds:.1f} s")
            inst.pause()
            self._sleep(seconds)
            inst.resume()
        elif action == "pg_restart":
            self.log("nemesis: PostgreSQL restart")
            self.pg.restart()  # type: ignore[union-attr]
        elif action == "pg_crash":
            self.log("nemesis: PostgreSQL crash (immediate shutdown), then start")
            self.pg.crash()  # type: ignore[union-attr]
            time.sleep(r.uniform(0.5, 2.0))
            self.pg.restart()  # type: ignore[union-attr]
        elif action == "db_cut":
            self.log("nemesis: every connection to PostgreSQL reset")
            self.db_proxy_cut()  # type: ignore[misc]
        elif action == "provider_pause":
            seconds = r.uniform(1.0, 4.0)
            self.log(f"nemesis: SIGSTOP the provider for {seconds:.1f} s")
            self.provider.pause()  # type: ignore[union-attr]
            self._sleep(seconds)
            self.provider.resume()  # type: ignore[union-attr]
        elif action == "provider_kill":
            self.log("nemesis: kill -9 the provider, restart")
            self.provider.kill9()  # type: ignore[union-attr]
            self._sleep(r.uniform(0.2, 1.5))
            self.provider.start()  # type: ignore[union-attr]
