"""Real processes for the client's tests: a tollgate server on a temporary SQLite file and a free
port, the lossy proxy (clients/testing/lossy_proxy.py), the fake provider.

``TOLLGATE_BIN`` names the server binary (default: build/tollgate of this checkout). Every process
started here writes its output to files in a temporary folder (a chatty process never blocks on a
full pipe) and is killed when the test class ends.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path
from typing import Any

from tollgate_client import Client, RetryPolicy

ROOT = Path(__file__).resolve().parents[3]
TOLLGATE_BIN = os.environ.get("TOLLGATE_BIN", str(ROOT / "build" / "tollgate"))
LOSSY_PROXY = ROOT / "clients" / "testing" / "lossy_proxy.py"
ADMIN_KEY = "test-admin-key-0123456789abcdef"
START_TIMEOUT_S = 15.0


def wait_for_line(path: Path, marker: str, process: subprocess.Popen[bytes], offset: int = 0) -> str:
    """The rest of the first line of ``path`` (from ``offset``) after ``marker``; waits for it."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        text = path.read_text(errors="replace")[offset:]
        at = text.find(marker)
        if at >= 0 and "\n" in text[at:]:
            return text[at + len(marker):].split("\n", 1)[0]
        if process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited ({process.returncode}) before {marker!r}:\n{text}")
        time.sleep(0.02)
    raise RuntimeError(f"no {marker!r} within {START_TIMEOUT_S} s in {path}")


class Processes:
    """Processes and their files in one temporary folder; close() ends every process it started."""

    def __init__(self) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="tollgate-py-")
        self.folder = Path(self._dir.name)
        self._started: list[subprocess.Popen[bytes]] = []

    def spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> tuple[
            subprocess.Popen[bytes], Path, Path]:
        out, err = self.folder / f"{name}.out", self.folder / f"{name}.err"
        with open(out, "ab") as o, open(err, "ab") as e:
            process = subprocess.Popen(argv, stdout=o, stderr=e, stdin=subprocess.DEVNULL, env=env)
        self._started.append(process)
        return process, out, err

    def close(self) -> None:
        for process in self._started:
            if process.poll() is None:
                process.kill()
                process.wait()
        self._dir.cleanup()


class Server:
    """``tollgate serve`` on a fresh SQLite file; restart() keeps the database and the port."""

    def __init__(self, processes: Processes, config: str | None = None) -> None:
        self._processes = processes
        self.database = processes.folder / "tollgate.db"
        self.config_path: Path | None = None
        if config is not None:
            self.config_path = processes.folder / "tollgate.toml"
            self.config_path.write_text(config)
        self.port = 0
        self._runs = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _start(self) -> None:
        argv = [TOLLGATE_BIN, "serve", "--listen", f"127.0.0.1:{self.port}", "--database", f"sqlite:{self.database}"]
        if self.config_path is not None:
            argv += ["--config", str(self.config_path)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOLLGATE_")}
        env["TOLLGATE_ADMIN_KEY"] = ADMIN_KEY
        self._runs += 1
        err_path = self._processes.folder / "server.err"
        offset = err_path.stat().st_size if err_path.exists() else 0
        self.process, _, err = self._processes.spawn("server", argv, env)
        port = wait_for_line(err, "listening on 127.0.0.1:", self.process, offset)
        self.port = int("".join(c for c in port.split()[0] if c.isdigit()))

    def stop(self) -> None:
        """A graceful stop (SIGTERM), waited for."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=15)

    def restart(self) -> None:
        self.stop()
        self._start()

    def log(self) -> str:
        return (self._processes.folder / "server.err").read_text(errors="replace")


class Proxy:
    """clients/testing/lossy_proxy.py in front of a port, with its request log."""

    count = 0

    def __init__(self, processes: Processes, target_port: int, *args: str) -> None:
        Proxy.count += 1
        self.log_path = processes.folder / f"proxy-{Proxy.count}.log"
        argv = [sys.executable, str(LOSSY_PROXY), "--target", f"127.0.0.1:{target_port}",
                "--log", str(self.log_path), *args]
        self.process, out, _ = processes.spawn(f"proxy-{Proxy.count}", argv)
        self.port = int(wait_for_line(out, "listening ", self.process))
        self.url = f"http://127.0.0.1:{self.port}"

    def kill(self) -> None:
        """Ends the proxy: its connections break and nothing listens on its port any more."""
        self.process.kill()
        self.process.wait()

    def requests(self) -> list[dict[str, Any]]:
        """Every request that reached the proxy, in order (seq, method, target, body, fault)."""
        if not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text().splitlines()]


def start_fake_provider(processes: Processes) -> int:
    """``tollgate fake-provider`` answering every job after 20 ms; its port."""
    argv = [TOLLGATE_BIN, "fake-provider", "--listen", "127.0.0.1:0", "--latency-ms", "20"]
    process, out, _ = processes.spawn("fake-provider", argv)
    return int(wait_for_line(out, "listening on 127.0.0.1:", process).strip())


def unused_port() -> int:
    """A port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RecordingSleep:
    """A client's ``sleep``: really waits, and remembers each wait in seconds."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        time.sleep(seconds)


FAST_RETRY = RetryPolicy(attempts_max=4, backoff_initial_ms=20, backoff_max_ms=100)


def fast_client(url: str, key: str | None = ADMIN_KEY, **options: Any) -> Client:
    """The C++ client tests' fast_options: 1 s connect, 3 s request, 4 attempts, 20 → 100 ms back-off."""
    settings: dict[str, Any] = {"connect_timeout_ms": 1000, "request_timeout_ms": 3000, "retry": FAST_RETRY}
    settings.update(options)
    return Client(url, key, **settings)


class ServerTestCase(unittest.TestCase):
    """One server for the class; each test gets its own account (``self.account``) with 10 credits."""

    config: str | None = None
    processes: Processes
    server: Server
    admin: Client
    _accounts = 0

    @classmethod
    def setUpClass(cls) -> None:
        cls.processes = Processes()
        try:
            cls.server = Server(cls.processes, cls.prepare(cls.processes))
        except BaseException:
            cls.processes.close()
            raise
        cls.admin = fast_client(cls.server.url)

    @classmethod
    def prepare(cls, processes: Processes) -> str | None:
        """The server's configuration (TOML), made before it starts; a subclass may start helpers."""
        return cls.config

    @classmethod
    def tearDownClass(cls) -> None:
        cls.admin.close()
        cls.processes.close()

    def setUp(self) -> None:
        ServerTestCase._accounts += 1
        self.account = f"acct-{ServerTestCase._accounts}"
        self.admin.create_account(self.account)
        self.admin.credit(self.account, 10, f"seed-{self.account}")

    def proxy(self, *args: str) -> Proxy:
        return Proxy(self.processes, self.server.port, *args)

    def assert_balances(self, account: str, *, available: int, reserved: int, used: int) -> None:
        a = self.admin.get_account(account)
        self.assertEqual((a.available, a.reserved, a.used), (available, reserved, used))
        self.assertEqual(a.available + a.reserved + a.used, a.purchased)

    def holds_of(self, account: str) -> int:
        return len(self.admin.list_holds(account_id=account).holds)
