// Test support: the real processes the client's tests talk to.
//
//   startServer()        `tollgate serve` on a fresh SQLite file in a temporary folder, on a free
//                        port (--listen 127.0.0.1:0; the port is read from its "listening on" log
//                        line), admin key ADMIN_KEY; optional TOML configuration (providers,
//                        rate-limit policies).
//   startFakeProvider()  `tollgate fake-provider` (an AI image service) on a free port.
//   startProxy()         clients/testing/lossy_proxy.py in front of a server, with its --log read
//                        back as one object per request.
//   unusedPort()         a port where nothing listens.
// The binary is TOLLGATE_BIN (default build/tollgate), the proxy LOSSY_PROXY (default
// clients/testing/lossy_proxy.py), both relative to the repository's root. Every child is killed
// when the test process exits, whatever happened.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { isAbsolute, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const REPO_ROOT = resolve(fileURLToPath(import.meta.url), "../../../../..");
export const ADMIN_KEY = "ts-client-admin-key-0123456789abcdef";

function fromRoot(path) {
  return isAbsolute(path) ? path : join(REPO_ROOT, path);
}

export const TOLLGATE_BIN = fromRoot(process.env.TOLLGATE_BIN || "build/tollgate");
export const LOSSY_PROXY = fromRoot(process.env.LOSSY_PROXY || "clients/testing/lossy_proxy.py");

const START_TIMEOUT_MS = 15_000;
const OUTPUT_BYTES_KEPT = 64 * 1024;
const children = new Set();
process.on("exit", () => {
  for (const child of children) child.kill("SIGKILL");
});

// Spawns `command` and resolves once a line of its stdout or stderr matches `pattern`, with the
// match; rejects (with everything it printed) if it exits or does not print it in time.
function spawnUntil(command, args, { env, pattern, what, needs }) {
  if (!existsSync(needs)) throw new Error(`${what}: ${needs} does not exist (set TOLLGATE_BIN / LOSSY_PROXY)`);
  const child = spawn(command, args, { env, stdio: ["ignore", "pipe", "pipe"] });
  children.add(child);
  let output = "";
  const exited = new Promise((resolveExit) => child.once("exit", (code, signal) => resolveExit(code ?? signal)));
  exited.then(() => children.delete(child));
  return new Promise((resolveStart, rejectStart) => {
    let started = false;
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      rejectStart(new Error(`${what} did not start within ${START_TIMEOUT_MS} ms:\n${output}`));
    }, START_TIMEOUT_MS);
    const onData = (chunk) => {
      output = (output + chunk.toString()).slice(-OUTPUT_BYTES_KEPT);
      const match = started ? null : output.match(pattern);
      if (match) {
        started = true;
        clearTimeout(timer);
        resolveStart({ child, match, exited, output: () => output });
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    exited.then((how) => {
      if (started) return;
      clearTimeout(timer);
      rejectStart(new Error(`${what} exited (${how}) before it started:\n${output}`));
    });
  });
}

async function stopChild(child, exited) {
  if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(timer);
}

// The environment of a child: this process's, less every TOLLGATE_* variable, plus `extra`.
function cleanEnv(extra) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("TOLLGATE_")) env[k] = v;
  return { ...env, ...extra };
}

/** A running server: { url, port, adminKey, folder, stop() }. `config`: TOML text, optional. */
export async function startServer({ config, env } = {}) {
  const folder = mkdtempSync(join(tmpdir(), "tollgate-ts-"));
  const args = ["serve", "--listen", "127.0.0.1:0", "--database", `sqlite:${join(folder, "tollgate.db")}`];
  if (config !== undefined) {
    const file = join(folder, "tollgate.toml");
    writeFileSync(file, config);
    args.push("--config", file);
  }
  const started = await spawnUntil(TOLLGATE_BIN, args, {
    env: cleanEnv({ TOLLGATE_ADMIN_KEY: ADMIN_KEY, ...env }),
    pattern: /listening on 127\.0\.0\.1:(\d+)/,
    what: "tollgate serve",
    needs: TOLLGATE_BIN,
  });
  const port = Number(started.match[1]);
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    adminKey: ADMIN_KEY,
    folder,
    log: started.output,
    async stop() {
      await stopChild(started.child, started.exited);
      rmSync(folder, { recursive: true, force: true });
    },
  };
}

/** The fake AI provider, answering at once: { url, port, stop() }. */
export async function startFakeProvider() {
  const started = await spawnUntil(TOLLGATE_BIN, ["fake-provider", "--listen", "127.0.0.1:0", "--latency-ms", "0"], {
    env: cleanEnv({}),
    pattern: /listening on 127\.0\.0\.1:(\d+)/,
    what: "tollgate fake-provider",
    needs: TOLLGATE_BIN,
  });
  const port = Number(started.match[1]);
  return { url: `http://127.0.0.1:${port}`, port, stop: () => stopChild(started.child, started.exited) };
}

/**
 * The lossy proxy in front of `targetPort`, with `faults` (its options, e.g. ["--drop-first-responses",
 * "1"]): { url, requests() — what reached it, one {seq, method, target, body, fault} each —, stop() }.
 */
export async function startProxy(targetPort, faults = []) {
  const folder = mkdtempSync(join(tmpdir(), "tollgate-ts-proxy-"));
  const logFile = join(folder, "requests.jsonl");
  const started = await spawnUntil(
    "python3",
    [LOSSY_PROXY, "--target", `127.0.0.1:${targetPort}`, "--log", logFile, ...faults],
    { env: cleanEnv({}), pattern: /^listening (\d+)$/m, what: "lossy_proxy.py", needs: LOSSY_PROXY },
  );
  const port = Number(started.match[1]);
  return {
    url: `http://127.0.0.1:${port}`,
    requests() {
      if (!existsSync(logFile)) return [];
      return readFileSync(logFile, "utf8")
        .split("\n")
        .filter((line) => line !== "")
        .map((line) => JSON.parse(line));
    },
    async stop() {
      await stopChild(started.child, started.exited);
      rmSync(folder, { recursive: true, force: true });
    },
  };
}

/** A port of 127.0.0.1 where nothing listens (bound, then closed). */
export async function unusedPort() {
  const server = createServer();
  await new Promise((resolveListen) => server.listen(0, "127.0.0.1", resolveListen));
  const { port } = server.address();
  await new Promise((resolveClose) => server.close(resolveClose));
  return port;
}
