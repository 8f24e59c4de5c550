"""Shared by the console's browser tests and its measurement: a tollgate server started for the
run, a tiny stdlib client for its API, and headless Chromium driven through chromedriver
(Debian 12: chromium, chromium-driver, python3-selenium)."""
import http.client
import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.parse

ADMIN_KEY = "console-test-admin-key-0123456789"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`tollgate serve` on a fresh SQLite database in a temp folder."""

    def __init__(self, binary, env=None, extra_args=()):
        self.dir = tempfile.mkdtemp(prefix="tollgate-console-")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(os.path.join(self.dir, "server.log"), "wb")
        full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TOLLGATE_ADMIN_KEY": ADMIN_KEY}
        full_env.update(env or {})
        self.proc = subprocess.Popen(
            [binary, "serve", "--listen", f"127.0.0.1:{self.port}", "--database", f"sqlite:{self.dir}/t.db", *extra_args],
            stdout=self.log, stderr=subprocess.STDOUT, env=full_env)
        deadline = time.time() + 20
        while time.time() < deadline:
            probe = Api(self.url, None)
            try:
                if probe.call("GET", "/readyz")[0] == 200:
                    return
            except OSError:
                pass
            finally:
                probe.close()
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the server did not start: see {self.dir}/server.log")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


class Api:
    """One keep-alive connection; JSON in and out."""

    def __init__(self, url, key=ADMIN_KEY):
        u = urllib.parse.urlparse(url)
        self.host, self.port, self.key = u.hostname, u.port, key
        self.conn = None

    def call(self, method, path, body=None):
        headers = {}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
            try:
                self.conn.request(method, path, body=data, headers=headers)
                r = self.conn.getresponse()
                raw = r.read()
                break
            except (http.client.HTTPException, ConnectionError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        text = raw.decode()
        try:
            return r.status, json.loads(text)
        except ValueError:
            return r.status, text

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def ok(self, method, path, body=None):
        status, value = self.call(method, path, body)
        if status >= 300:
            raise AssertionError(f"{method} {path}: {status} {value}")
        return value

    def account(self, account_id, credits=0):
        self.ok("POST", "/v1/accounts", {"account_id": account_id})
        if credits:
            self.ok("POST", f"/v1/accounts/{account_id}/credits", {"amount": credits, "reference": f"{account_id}-buy"})
        return self.ok("GET", f"/v1/accounts/{account_id}")

    def hold(self, account_id, amount, request_id, ttl_ms=None):
        body = {"account_id": account_id, "amount": amount, "request_id": request_id}
        if ttl_ms:
            body["ttl_ms"] = ttl_ms
        return self.ok("POST", "/v1/holds", body)

    def metrics(self):
        status, text = self.call("GET", "/metrics")
        out = {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            name_labels, value = line.rsplit(" ", 1)
            out[name_labels] = float(value)
        return out


def chrome(window=(1280, 900)):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={window[0]},{window[1]}", "--no-first-run", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-default-apps", "--metrics-recording-only", "--no-default-browser-check"):
        options.add_argument(arg)
    options.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    service = Service(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
    return webdriver.Chrome(service=service, options=options)


class FakeProvider:
    """`tollgate fake-provider`: an AI image service whose work takes 150-250 ms (time scale 100)."""

    def __init__(self, binary):
        self.proc = subprocess.Popen([binary, "fake-provider", "--listen", "127.0.0.1:0", "--time-scale", "100"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        first = self.proc.stdout.readline()  # "listening on HOST:PORT"
        if not first.startswith("listening on "):
            self.stop()
            raise RuntimeError(f"fake-provider did not start: {first!r}")
        self.url = "http://" + first.split()[-1]

    def config(self, folder):
        """A configuration file naming this provider `imagegen`; its path."""
        path = os.path.join(folder, "tollgate.toml")
        with open(path, "w") as f:
            f.write(f"""[providers.imagegen]
url = "{self.url}/generate"
status_url = "{self.url}/status/{{id}}"
timeout_ms = 60000
expected_duration_ms = 250
""")
        return path

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.proc.stdout.close()
