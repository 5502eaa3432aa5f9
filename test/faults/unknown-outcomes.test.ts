import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { chromium, type APIRequestContext, type Browser } from "@playwright/test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testPort } from "@/scripts/test-ports.mjs";
import { IdemgateClient } from "@/lib/client/index";
import { derivedKey } from "@/lib/tools/upstream";
import { createTestPostgres, REDIS_TEST_URL } from "@/test/support/databases";
import { removeDataDir, startServer, type RunningServer } from "@/test/support/server";
import { deleteRedisPrefix } from "@/test/support/stores";

// A call whose outcome is unknown never runs twice: real servers (production build) in both
// configurations in front of a real HTTP service that counts the side effects it performs.
// Ports 3137–3138 (gateways), 4331–4334 (services) are this file's (moved by IDEMGATE_TEST_PORT_BASE).

const SERVICE_PORT = testPort(4331);
/** how long /slow and /dedupe take to answer, against their tools' 400 ms and 1,500 ms timeouts */
const SLOW_ANSWER_MS = 3_000;
const LATE_PORT = testPort(4332);
const CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

const summary: { case: string; expected: number; counted: number }[] = [];

/**
 * The service behind the upstream tools. Every path performs its side effect (counted per path and
 * scope-bound key) and then answers as its name says; /dedupe and /tenant honour the forwarded key.
 */
class CountingService {
  readonly effects = new Map<string, number>();
  readonly keysSeen = new Map<string, string[]>();
  private readonly stored = new Map<string, unknown>();
  private readonly holds = new Set<() => void>();
  private readonly finished = new Map<string, number>();
  private server: Server | null = null;

  /** How many calls to `path` the service has finished (answered, or ended as its case says). */
  finishedCalls(path: string): number {
    return this.finished.get(path) ?? 0;
  }

  /** Answers every call /hold is holding. */
  answerHeld(): void {
    for (const release of [...this.holds]) if (this.holds.delete(release)) release();
  }

  count(path: string): number {
    let n = 0;
    for (const [k, v] of this.effects) if (k.startsWith(`${path}\n`)) n += v;
    return n;
  }

  private effect(path: string, key: string): number {
    const id = `${path}\n${key}`;
    const n = (this.effects.get(id) ?? 0) + 1;
    this.effects.set(id, n);
    return n;
  }

  private handle(req: IncomingMessage, res: ServerResponse, body: string): void {
    const path = (req.url ?? "/").split("?")[0];
    const key = String(req.headers["idempotency-key"] ?? "");
    this.keysSeen.set(path, [...(this.keysSeen.get(path) ?? []), key]);
    const json = (status: number, value: unknown) => {
      this.finished.set(path, this.finishedCalls(path) + 1);
      if (res.destroyed) return;
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(value));
    };
    if (req.method === "GET" && path === "/probe/status") {
      const result = this.stored.get(`/probe\n${key}`);
      return json(200, result === undefined ? { outcome: "not_applied" } : { outcome: "applied", status: 201, body: result });
    }
    const dedupes = path === "/dedupe" || path === "/tenant";
    const previous = this.stored.get(`${path}\n${key}`);
    if (dedupes && previous !== undefined) return json(201, previous);
    const n = this.effect(path, key);
    const result = { invoiceId: `inv_${randomUUID().slice(0, 8)}`, path, n, echo: JSON.parse(body || "{}") };
    this.stored.set(`${path}\n${key}`, result);
    switch (path) {
      case "/slow":
      case "/dedupe":
        setTimeout(() => json(201, result), SLOW_ANSWER_MS);
        return;
      case "/fail500":
        return json(500, { error: "crashed after writing" });
      case "/probe":
        return json(502, { error: "bad gateway after writing" });
      case "/reset":
        this.finished.set(path, this.finishedCalls(path) + 1);
        req.socket.destroy();
        return;
      case "/hold": {
        // answered when the test says so (answerHeld), however slow the machine; at the latest after 25 s
        const release = () => json(201, result);
        this.holds.add(release);
        setTimeout(() => this.holds.delete(release) && release(), 25_000).unref();
        return;
      }
      default:
        return json(201, result);
    }
  }

  async listen(port: number): Promise<void> {
    this.server = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => this.handle(req, res, body));
    });
    await new Promise<void>((resolve) => this.server!.listen(port, "127.0.0.1", resolve));
  }

  async close(): Promise<void> {
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
  }
}

// A service that answers at once gets a timeout no busy machine reaches (a timeout there would be an
// unknown outcome the test did not ask for); the two whose case IS the timeout get 400 ms against
// their 3 s answers (with 1.2 s, a server whose event loop stalled for a second under the suite's
// load read the answer before its timer fired, once).
const upstream = (name: string, path: string, extra: Record<string, unknown> = {}, port = SERVICE_PORT) => ({
  name,
  url: `http://127.0.0.1:${port}${path}`,
  timeoutMs: 10_000,
  leaseMs: 15_000,
  ...extra,
});
const TIMES_OUT = { timeoutMs: 400, leaseMs: 5_000 };
// The deduplicating service's first answer comes after SLOW_ANSWER_MS, so its first call still times
// out; its answer to the resend comes at once, and must reach the gateway within the tool's timeout
// on a machine busy with the other suites (400 ms turned that answer into a second 504 there).
const DEDUPE_TIMES_OUT = { timeoutMs: 1_500, leaseMs: 5_000 };

const UPSTREAM_TOOLS = JSON.stringify([
  upstream("svc.slow", "/slow", TIMES_OUT),
  upstream("svc.fail500", "/fail500"),
  upstream("svc.reset", "/reset"),
  upstream("svc.hold", "/hold", { timeoutMs: 30_000, leaseMs: 40_000 }),
  upstream("svc.probe", "/probe", { statusUrl: `http://127.0.0.1:${SERVICE_PORT}/probe/status` }),
  upstream("svc.dedupe", "/dedupe", { ...DEDUPE_TIMES_OUT, dedupes: true }),
  upstream("svc.tenant", "/tenant", { dedupes: true }),
  upstream("svc.late", "/late", {}, LATE_PORT),
]);

async function waitFor<T>(what: string, probe: () => Promise<T | null | false>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

interface Problem {
  type: string;
  status: number;
  key?: string;
  executionId?: string;
  state?: string;
}

const configurations = [
  { name: "embedded (PGlite)", port: testPort(3137), servers: false },
  { name: "Redis and PostgreSQL", port: testPort(3138), servers: true },
] as const;

describe.each(configurations)("unknown outcomes on the $name configuration", (configuration) => {
  const dataDir = `.data/fault-unknown-${configuration.port}`;
  const prefix = `idgfault-unknown-${randomUUID().slice(0, 6)}`;
  const service = new CountingService();
  let pg: Awaited<ReturnType<typeof createTestPostgres>> | null = null;
  let server: RunningServer;
  let token: string;
  let client: IdemgateClient;
  let browser: Browser;
  let operator: APIRequestContext;

  const keyDetail = async (key: string, scope = "demo") => {
    const res = await fetch(`${server.url}/api/v1/keys/${encodeURIComponent(scope)}/${encodeURIComponent(key)}`, { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
    return (await res.json()) as { record: { state: string; outcomeNote: string | null } | null; timeline: { type: string; outcome?: string; kind?: string }[] };
  };

  /** The first call, as any HTTP client sends it, and its answer. */
  const invoke = async (tool: string, args: unknown, key: string, bearer = token) => {
    const res = await fetch(`${server.url}/api/v1/tools/${tool}/invoke`, {
      method: "POST",
      headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json", "idempotency-key": key },
      body: JSON.stringify(args),
    });
    return { status: res.status, body: (await res.json()) as Problem & Record<string, unknown> };
  };

  /** Five retries through lib/client, each a call of its own with the same key. */
  const retries = async (tool: string, args: Record<string, unknown>, key: string) => {
    const answers: { replayed?: boolean; body?: unknown; problem?: string; status?: number }[] = [];
    for (let i = 0; i < 5; i++) {
      try {
        const out = await client.invoke(tool, args, { key });
        answers.push({ replayed: out.replayed, body: out.body, status: out.status });
      } catch (err) {
        const e = err as { problem?: { type?: string }; status?: number };
        answers.push({ problem: e.problem?.type, status: e.status });
      }
    }
    return answers;
  };

  beforeAll(async () => {
    await service.listen(SERVICE_PORT);
    await removeDataDir(dataDir);
    const env: Record<string, string> = { IDEMGATE_UPSTREAM_TOOLS: UPSTREAM_TOOLS, IDEMGATE_RECONCILE_INTERVAL_MS: "1000" };
    if (configuration.servers) {
      pg = await createTestPostgres(`fault_unknown`);
      Object.assign(env, { DATABASE_URL: pg.url, REDIS_URL: REDIS_TEST_URL, IDEMGATE_REDIS_PREFIX: prefix });
    }
    server = await startServer({ port: configuration.port, dataDir, env });
    const credentials = await server.credentials();
    token = credentials.apiToken;
    client = new IdemgateClient({ baseUrl: server.url, token, retry: { baseDelayMs: 20, maxDelayMs: 100 } });

    browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium", args: CHROMIUM_ARGS });
    const page = await browser.newPage({ baseURL: server.url });
    await page.goto("/login");
    await page.getByLabel("Email").fill(credentials.email);
    await page.getByLabel("Password").fill(credentials.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL((url) => !url.pathname.startsWith("/login"));
    operator = page.request;
  });

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await service.close();
    await deleteRedisPrefix(prefix);
    await pg?.drop();
    await removeDataDir(dataDir);
  });

  const unknownCases = [
    { case: "timeout after the effect", tool: "svc.slow", path: "/slow", status: 504, note: "timed out after 400 ms" },
    { case: "500 after the effect", tool: "svc.fail500", path: "/fail500", status: 502, note: "the service answered 500" },
    { case: "reset after the request was sent", tool: "svc.reset", path: "/reset", status: 502, note: /^the connection failed after the request was sent/ },
  ];

  it.each(unknownCases)("$case: held as unknown, 5 retries through lib/client run nothing", async ({ case: name, tool, path, status, note }) => {
    const key = `u-${randomUUID()}`;
    const before = service.finishedCalls(path);
    const first = await invoke(tool, { amountCents: 500 }, key);
    expect(first.status).toBe(status);
    expect(first.body).toMatchObject({ type: "/problems/outcome_unknown", key, state: "unknown", executionId: expect.any(String) });

    const answers = await retries(tool, { amountCents: 500 }, key);
    expect(answers).toEqual(Array(5).fill({ problem: "/problems/outcome_unknown", status: 409 }));
    await waitFor("the service to finish the call", async () => service.finishedCalls(path) >= before + 1); // the slow service's late answer, too
    const detail = await keyDetail(key);
    expect(detail.record?.state).toBe("unknown");
    expect(detail.record?.outcomeNote).toEqual(typeof note === "string" ? note : expect.stringMatching(note));
    const counted = service.count(path);
    summary.push({ case: `${configuration.name}: ${name}, 5 retries`, expected: 1, counted });
    expect(counted).toBe(1);
    service.effects.clear();
  });

  it("an in-process tool that throws after its effect: held, 5 retries charge once", async () => {
    const key = `u-${randomUUID()}`;
    const customerId = `cus_${randomUUID().slice(0, 8)}`;
    const args = { customerId, amountCents: 700, currency: "EUR", simulate: { outcome: "throw_after_effect" } };
    const first = await invoke("payments.charge", args, key);
    expect(first.status).toBe(502);
    expect(first.body).toMatchObject({ type: "/problems/outcome_unknown", state: "unknown" });
    const answers = await retries("payments.charge", args, key);
    // the reconciler may have asked the tool meanwhile (it answers applied): then retries replay that charge
    for (const a of answers) expect(a.problem === "/problems/outcome_unknown" || a.replayed === true).toBe(true);
    const listed = await client.invoke<{ charges: unknown[] }>("payments.list_charges", { customerId });
    summary.push({ case: `${configuration.name}: in-process throw after the effect, 5 retries`, expected: 1, counted: listed.body.charges.length });
    expect(listed.body.charges).toHaveLength(1);
  });

  it("release while running: refused without force; forced, the late result is kept and retries replay it", async () => {
    const key = `u-${randomUUID()}`;
    const running = invoke("svc.hold", { amountCents: 900 }, key);
    await waitFor("the service to receive the call", async () => service.count("/hold") === 1);
    const url = `${server.url}/api/v1/keys/demo/${encodeURIComponent(key)}/release`;
    const refused = await operator.post(url, { data: { reason: "looks stuck to me" }, headers: { origin: server.url } });
    expect(refused.status()).toBe(409);
    expect((await refused.json()).detail).toMatch(/still running/);
    const forced = await operator.post(url, { data: { reason: "looks stuck to me", force: true }, headers: { origin: server.url } });
    expect(forced.status(), await forced.text()).toBe(200);
    service.answerHeld();

    const first = await running;
    expect(first.status).toBe(201);
    const answers = await retries("svc.hold", { amountCents: 900 }, key);
    expect(answers.every((a) => a.replayed === true && JSON.stringify(a.body) === JSON.stringify(first.body))).toBe(true);
    // outcomes reach the audit log in batches, off the hot path
    const outcomes = await waitFor("the late completion in the key's timeline", async () => {
      const seen = (await keyDetail(key)).timeline.filter((e) => e.type === "outcome").map((e) => e.outcome);
      return seen.includes("late_completion") ? seen : null;
    }, 5_000).catch(async () => (await keyDetail(key)).timeline.filter((e) => e.type === "outcome").map((e) => e.outcome));
    expect(outcomes).toEqual(["late_completion"]);
    const counted = service.count("/hold");
    summary.push({ case: `${configuration.name}: forced release while running, 5 retries`, expected: 1, counted });
    expect(counted).toBe(1);
  });

  it("with a statusUrl, the reconciler resolves the key with the service's result and retries replay it", async () => {
    const key = `u-${randomUUID()}`;
    const first = await invoke("svc.probe", { amountCents: 1_100 }, key);
    expect(first.status).toBe(502);
    await waitFor("the reconciler to resolve the key", async () => (await keyDetail(key)).record?.state === "done", 30_000);
    const answers = await retries("svc.probe", { amountCents: 1_100 }, key);
    expect(answers.every((a) => a.replayed === true && a.status === 201)).toBe(true);
    expect(answers[0].body).toMatchObject({ path: "/probe", n: 1 });
    const counted = service.count("/probe");
    summary.push({ case: `${configuration.name}: statusUrl probe resolves, 5 retries`, expected: 1, counted });
    expect(counted).toBe(1);
  });

  it("with dedupes, an unknown call is sent again with the same derived key and the service applies it once", async () => {
    const key = `u-${randomUUID()}`;
    const before = service.finishedCalls("/dedupe");
    const first = await invoke("svc.dedupe", { amountCents: 1_300 }, key);
    expect(first.status).toBe(504);
    await waitFor("the service to finish the first call", async () => service.finishedCalls("/dedupe") >= before + 1);
    const answers = await retries("svc.dedupe", { amountCents: 1_300 }, key);
    expect(answers[0]).toMatchObject({ replayed: false, status: 201 });
    expect(answers.slice(1).every((a) => a.replayed === true)).toBe(true);
    expect(new Set(service.keysSeen.get("/dedupe"))).toEqual(new Set([derivedKey("demo", key)]));
    const counted = service.count("/dedupe");
    summary.push({ case: `${configuration.name}: dedupes resend, 5 retries`, expected: 1, counted });
    expect(counted).toBe(1);
  });

  it("a refused connection is not run: the key is released and a retry runs once", async () => {
    const key = `u-${randomUUID()}`;
    const first = await invoke("svc.late", { amountCents: 1_500 }, key);
    expect(first.status).toBe(502);
    expect(first.body.type).toBe("/problems/tool_failed");
    expect((await keyDetail(key)).record).toBeNull();
    const late = new CountingService();
    await late.listen(LATE_PORT);
    try {
      const answers = await retries("svc.late", { amountCents: 1_500 }, key);
      expect(answers[0]).toMatchObject({ replayed: false, status: 201 });
      expect(answers.slice(1).every((a) => a.replayed === true)).toBe(true);
      const counted = late.count("/late");
      summary.push({ case: `${configuration.name}: connection refused, then 5 retries`, expected: 1, counted });
      expect(counted).toBe(1);
    } finally {
      await late.close();
    }
  });

  it("two tenants with one key string are two actions at a service that deduplicates on the forwarded key", async () => {
    const created = await operator.post(`${server.url}/api/v1/tokens`, { data: { scope: "other-tenant", label: "fault suite" }, headers: { origin: server.url } });
    expect(created.status()).toBe(201);
    const other = (await created.json()) as { token: string };
    const key = `shared-${randomUUID()}`;
    expect((await invoke("svc.tenant", { amountCents: 1 }, key)).status).toBe(201);
    expect((await invoke("svc.tenant", { amountCents: 1 }, key, other.token)).status).toBe(201);
    expect(new Set(service.keysSeen.get("/tenant"))).toEqual(new Set([derivedKey("demo", key), derivedKey("other-tenant", key)]));
    const counted = service.count("/tenant");
    summary.push({ case: `${configuration.name}: two tenants, one key string`, expected: 2, counted });
    expect(counted).toBe(2);
  });
});

afterAll(() => {
  console.log("\nunknown outcomes: side effects expected vs counted");
  for (const row of summary) console.log(`  ${row.case.padEnd(78)} expected ${row.expected}, counted ${row.counted}`);
});
