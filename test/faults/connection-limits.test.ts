import http from "node:http";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testPort } from "@/scripts/test-ports.mjs";
import { removeDataDir, startServer, type RunningServer } from "@/test/support/server";

// Connections that hold the server without finishing a request: a body sent a byte now and then
// (a slow-loris) is cut once it stalls for IDEMGATE_BODY_IDLE_TIMEOUT_MS, a request trickled faster
// than that once IDEMGATE_REQUEST_TIMEOUT_MS passes, and connections over IDEMGATE_MAX_CONNECTIONS
// are answered 503. Real sockets against a real server process (scripts/serve.mjs, the production
// build, embedded database); short limits so the test waits seconds. Port 3187 is this file's.

const IDLE_MS = 1_000;
const REQUEST_MS = 4_000;
const MAX_CONNECTIONS = 6;

let server: RunningServer;
let token: string;

beforeAll(async () => {
  const port = testPort(3187);
  const dataDir = `.data/fault-limits-${port}`;
  await removeDataDir(dataDir);
  server = await startServer({
    port,
    dataDir,
    env: {
      IDEMGATE_BODY_IDLE_TIMEOUT_MS: String(IDLE_MS),
      IDEMGATE_REQUEST_TIMEOUT_MS: String(REQUEST_MS),
      IDEMGATE_MAX_CONNECTIONS: String(MAX_CONNECTIONS),
      IDEMGATE_DEMO_TRAFFIC: "0",
    },
  });
  token = (await server.credentials()).apiToken;
}, 180_000);

afterAll(async () => {
  await server?.stop();
});

/** A raw connection: what the server sent, resolved when it closes the connection. */
function connect(): { socket: net.Socket; opened: Promise<void>; closed: Promise<string> } {
  const socket = net.connect({ host: "127.0.0.1", port: server.port });
  const chunks: Buffer[] = [];
  socket.on("data", (c: Buffer) => chunks.push(c));
  const opened = new Promise<void>((resolve, reject) => socket.once("connect", () => resolve()).once("error", reject));
  const closed = new Promise<string>((resolve) => socket.once("close", () => resolve(Buffer.concat(chunks).toString("utf8"))));
  socket.on("error", () => {});
  return { socket, opened, closed };
}

/** The first whole answer on a connection (status and body), leaving the connection open. */
function firstAnswer(socket: net.Socket): Promise<{ status: number; type: string; body: string }> {
  return new Promise((resolve, reject) => {
    let buffered = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      const end = buffered.indexOf("\r\n\r\n");
      if (end < 0) return;
      const head = buffered.subarray(0, end).toString("latin1");
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
      if (buffered.length < end + 4 + length) return;
      socket.off("data", onData);
      resolve({
        status: Number(head.split(" ")[1]),
        type: /\r\ncontent-type: *([^\r]+)/i.exec(head)?.[1] ?? "",
        body: buffered.subarray(end + 4, end + 4 + length).toString("utf8"),
      });
    };
    socket.on("data", onData);
    socket.once("close", () => reject(new Error(`closed before an answer: ${buffered.toString("utf8")}`)));
  });
}

function invokeHead(key: string, contentLength: number): string {
  return (
    `POST /api/v1/tools/payments.charge/invoke HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n` +
    `Idempotency-Key: ${key}\r\nContent-Type: application/json\r\nContent-Length: ${contentLength}\r\n\r\n`
  );
}

const chargeBody = JSON.stringify({ customerId: "cus_limits", amountCents: 700, currency: "EUR" });

/** One whole call on a connection of its own. */
function invoke(key: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: "127.0.0.1",
        port: server.port,
        path: "/api/v1/tools/payments.charge/invoke",
        method: "POST",
        agent: false,
        headers: { authorization: `Bearer ${token}`, "idempotency-key": key, "content-type": "application/json" },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c)).on("end", () => resolve({ status: res.statusCode!, body: Buffer.concat(chunks).toString("utf8") }));
      },
    );
    req.on("error", reject);
    req.end(chargeBody);
  });
}

function expectProblem(raw: string, status: number, code: string) {
  expect(raw).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
  expect(raw).toMatch(/\r\ncontent-type: application\/problem\+json/i);
  expect(JSON.parse(raw.slice(raw.indexOf("\r\n\r\n") + 4))).toMatchObject({ type: `/problems/${code}`, status });
}

describe("connection limits", () => {
  it("cuts a body that stalls for the idle timeout with 408, and runs nothing", async () => {
    const key = `slow-body-${Date.now()}`;
    const { socket, opened, closed } = connect();
    await opened;
    socket.write(invokeHead(key, chargeBody.length));
    // one byte now, then one after every gap longer than the idle timeout, until the server cuts it
    let sent = 0;
    const sendByte = () => {
      if (socket.destroyed || sent >= chargeBody.length - 1) return;
      socket.write(chargeBody[sent++]);
      gap = setTimeout(sendByte, IDLE_MS * 3);
    };
    let gap: NodeJS.Timeout | undefined;
    sendByte();
    const raw = await closed;
    clearTimeout(gap);
    expectProblem(raw, 408, "request_timeout");
    expect(sent).toBeLessThan(chargeBody.length - 1);
    // the key was never taken: the same key runs now as a first call
    const first = await invoke(key);
    expect(first.status, first.body).toBe(200);
  });

  it("cuts a request trickled faster than the idle timeout once the request timeout passes, with 408", async () => {
    const { socket, opened, closed } = connect();
    await opened;
    socket.write(invokeHead(`trickle-${Date.now()}`, 100_000));
    const every = setInterval(() => !socket.destroyed && socket.write(" "), IDLE_MS / 5);
    const raw = await closed;
    clearInterval(every);
    expectProblem(raw, 408, "request_timeout");
  });

  it("answers 503 server_busy on connections over the cap, and serves again once they close", async () => {
    const connections = Array.from({ length: MAX_CONNECTIONS + 3 }, () => connect());
    // every connection is open before any sends its request: the server counts them as they arrive
    await Promise.all(connections.map((c) => c.opened));
    const answers = await Promise.all(
      connections.map((c) => {
        const answer = firstAnswer(c.socket);
        c.socket.write("GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        return answer;
      }),
    );
    const busy = answers.filter((a) => a.status === 503);
    const served = answers.filter((a) => a.status === 200);
    expect(busy.length + served.length).toBe(answers.length);
    expect(busy.length).toBeGreaterThanOrEqual(3);
    expect(served.length).toBeGreaterThanOrEqual(1);
    expect(served.length).toBeLessThanOrEqual(MAX_CONNECTIONS);
    for (const a of busy) {
      expect(a.type).toBe("application/problem+json");
      expect(JSON.parse(a.body)).toMatchObject({ type: "/problems/server_busy", status: 503 });
    }
    for (const c of connections) c.socket.destroy();
    await Promise.all(connections.map((c) => c.closed));
    // the server sees the closes on its own time: each try is a whole call on a new connection
    let answer = await invoke(`after-busy-${Date.now()}`);
    while (answer.status === 503) answer = await invoke(`after-busy-${Date.now()}`);
    expect(answer.status, answer.body).toBe(200);
  });
});
