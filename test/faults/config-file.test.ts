import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { testPort } from "@/scripts/test-ports.mjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectOnRevision, REVISIONS } from "@/test/support/mcp-revisions";
import { ROOT, removeDataDir, startServer, type RunningServer } from "@/test/support/server";

// A production server (scripts/serve.mjs) started with IDEMGATE_CONFIG, on the embedded default: a
// broken file refuses the start naming the field; a declared upstream tool validates its arguments by
// its inputSchema over HTTP and forwards good calls (with the secret from the environment) to a local
// service; the schema is advertised in /api/v1/tools and MCP tools/list (the SDK's client); SIGHUP
// serves a new tool, lets a running call finish under its old declaration, and keeps the old tools
// when the new file is broken. Ports 3151–3153 are this file's (moved by IDEMGATE_TEST_PORT_BASE).

const SECRET = `sk_${randomUUID()}`;

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: unknown;
}

/** A local HTTP service that records each request and answers 200 (after `?slow` ms when the body asks). */
function startService(): Promise<{ server: Server; url: string; received: Received[] }> {
  const received: Received[] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "null") as { slowMs?: number } | null;
    received.push({ path: req.url ?? "", headers: req.headers, body });
    if (body?.slowMs) await sleep(body.slowMs);
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ invoiceId: `inv_${received.length}`, path: req.url }));
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received })));
}

const toolsYaml = (service: string, invoicesPath = "/invoices", extra = "") => `
tools:
  - name: billing.create_invoice
    kind: write
    description: Create an invoice
    inputSchema:
      type: object
      required: [customerId, amountCents]
      additionalProperties: false
      properties:
        customerId: { type: string, minLength: 3 }
        amountCents: { type: integer, minimum: 1 }
        slowMs: { type: integer }
    leaseMs: 20000
    upstream:
      url: "${service}${invoicesPath}"
      timeoutMs: 5000
      headers: { authorization: "Bearer \${FAULT_BILLING_TOKEN}" }
  - name: payments.charge_card
    runs: client
    description: Charge a card through the payment SDK
    inputSchema: { type: object, required: [orderId], properties: { orderId: { type: string } } }
${extra}
mcpServers:
  - { name: counter, command: ${JSON.stringify(process.execPath)}, args: ["--import", "tsx", "test/support/mcp-test-server.ts", "--stdio"], timeoutMs: 5000 }
`;

/** Starts serve.mjs with a broken file and waits for it to give up: its exit code and what it printed on stderr. */
function refusedStart(port: number, file: string, env: Record<string, string> = {}): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [path.join(ROOT, "scripts", "serve.mjs"), "-p", String(port), "-H", "127.0.0.1"], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, NEXT_TELEMETRY_DISABLED: "1", IDEMGATE_DATA_DIR: `.data/fault-config-refused-${port}`, REDIS_URL: "", DATABASE_URL: "", IDEMGATE_CONFIG: file, ...env },
  });
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  const killer = setTimeout(() => child.kill("SIGKILL"), 90_000);
  return new Promise((resolve) =>
    child.on("exit", (code) => {
      clearTimeout(killer);
      resolve({ code, stderr });
    }),
  );
}

describe("a server started with a configuration file", () => {
  const dataDir = ".data/fault-config";
  const dir = mkdtempSync(path.join(tmpdir(), "idemgate-config-"));
  const file = path.join(dir, "idemgate.config.yaml");
  let service: Awaited<ReturnType<typeof startService>>;
  let server: RunningServer;
  let token: string;
  const invoke = (tool: string, args: unknown, key: string | null = randomUUID()) =>
    fetch(`${server.url}/api/v1/tools/${tool}/invoke`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json", ...(key ? { "idempotency-key": key } : {}) },
      body: JSON.stringify(args),
    });
  const listed = async () => ((await (await fetch(`${server.url}/api/v1/tools`, { headers: { authorization: `Bearer ${token}` } })).json()) as { tools: { name: string; source: string; argumentsSchema: unknown }[] }).tools;
  async function until<T>(what: string, read: () => Promise<T>, ok: (value: T) => boolean): Promise<T> {
    for (let i = 0; i < 100; i++) {
      const value = await read();
      if (ok(value)) return value;
      await sleep(200);
    }
    throw new Error(`${what} did not happen:\n${server.output()}`);
  }

  beforeAll(async () => {
    service = await startService();
    writeFileSync(file, toolsYaml(service.url));
    await removeDataDir(dataDir);
    server = await startServer({ port: testPort(3151), dataDir, env: { IDEMGATE_CONFIG: file, FAULT_BILLING_TOKEN: SECRET, IDEMGATE_RECONCILE_INTERVAL_MS: "0" } });
    token = (await server.credentials()).apiToken;
  });
  afterAll(async () => {
    await server?.stop();
    service?.server.close();
    await removeDataDir(dataDir);
  });

  it("refuses to start with a broken file: exits non-zero and names the field's path on stderr", async () => {
    const broken = path.join(dir, "broken.yaml");
    writeFileSync(broken, toolsYaml("http://127.0.0.1:9").replace("timeoutMs: 5000", "timeoutMs: 20000"));
    const unset = path.join(dir, "unset.yaml");
    writeFileSync(unset, toolsYaml("http://127.0.0.1:9"));
    const [timeout, missing] = await Promise.all([refusedStart(testPort(3152), broken, { FAULT_BILLING_TOKEN: "x" }), refusedStart(testPort(3153), unset, { FAULT_BILLING_TOKEN: "" })]);
    expect(timeout.code).not.toBe(0);
    expect(timeout.stderr).toContain(`could not start: ${broken}:`);
    expect(timeout.stderr).toMatch(/tools\[0\]\.upstream\.timeoutMs: must be below the lease \(20000 ms\)/);
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toContain("tools[0].upstream.headers.authorization: the environment variable FAULT_BILLING_TOKEN is not set");
    await Promise.all([removeDataDir(`.data/fault-config-refused-${testPort(3152)}`), removeDataDir(`.data/fault-config-refused-${testPort(3153)}`)]);
  });

  it("validates arguments by the inputSchema (400 with the validator's errors, nothing sent) and forwards a good call with the secret", async () => {
    const bad = await invoke("billing.create_invoice", { customerId: "c", amountCents: 0, note: "x" });
    expect(bad.status).toBe(400);
    expect(bad.headers.get("content-type")).toContain("application/problem+json");
    const problem = (await bad.json()) as { type: string; errors: { path: string; message: string }[] };
    expect(problem.type).toBe("/problems/invalid_arguments");
    expect(problem.errors).toEqual(
      expect.arrayContaining([
        { path: "customerId", message: "must NOT have fewer than 3 characters" },
        { path: "amountCents", message: "must be >= 1" },
        { path: "note", message: "is not an argument of billing.create_invoice" },
      ]),
    );
    expect(service.received).toHaveLength(0);

    const key = randomUUID();
    const first = await invoke("billing.create_invoice", { customerId: "cus_1", amountCents: 100 }, key);
    expect(first.status).toBe(200);
    const body = await first.json();
    const replay = await invoke("billing.create_invoice", { customerId: "cus_1", amountCents: 100 }, key);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(await replay.json()).toEqual(body);
    expect(service.received).toHaveLength(1);
    expect(service.received[0]).toMatchObject({ path: "/invoices", body: { customerId: "cus_1", amountCents: 100 } });
    expect(service.received[0].headers.authorization).toBe(`Bearer ${SECRET}`);
    expect(service.received[0].headers["idempotency-key"]).toMatch(/^idg_/);

    // a client-run tool is refused through /invoke, naming how it runs
    const clientRun = await invoke("payments.charge_card", { orderId: "o1" });
    expect(clientRun.status).toBe(400);
  });

  it("advertises the schema in /api/v1/tools and MCP tools/list, beside the file's MCP server's tools", async () => {
    const tools = await listed();
    const invoice = tools.find((t) => t.name === "billing.create_invoice")!;
    expect(invoice.source).toBe("upstream");
    expect(invoice.argumentsSchema).toMatchObject({ type: "object", required: ["customerId", "amountCents"], additionalProperties: false });
    expect(tools.find((t) => t.name === "payments.charge_card")).toMatchObject({ source: "client", argumentsSchema: { required: ["orderId"] } });
    await until("the file's MCP server connecting", listed, (ts) => ts.some((t) => t.name === "counter.increment"));

    // MCP on both revisions (the v2 client: 2026-07-28 negotiated, 2025-11-25 by initialize)
    for (const { revision } of REVISIONS) {
      const client = await connectOnRevision(`${server.url}/mcp`, token, revision, "fault-config");
      try {
        expect(client.getNegotiatedProtocolVersion()).toBe(revision);
        const { tools: mcpTools } = await client.listTools();
        const mcpInvoice = mcpTools.find((t) => t.name === "billing.create_invoice")!;
        expect(mcpInvoice.inputSchema).toMatchObject({ type: "object", required: ["customerId", "amountCents"], properties: { customerId: { type: "string", minLength: 3 }, amountCents: { type: "integer", minimum: 1 } } });
        expect(mcpInvoice.inputSchema.properties).toHaveProperty("idempotency_key");
        expect(mcpTools.map((t) => t.name)).toContain("counter.increment");
        const refused = await client.callTool({ name: "billing.create_invoice", arguments: { customerId: "c", amountCents: 1 }, _meta: { "io.idemgate/idempotency-key": randomUUID() } });
        expect(refused.isError).toBe(true);
        expect(JSON.stringify(refused.content)).toContain("customerId");
      } finally {
        await client.close();
      }
    }
    expect(service.received).toHaveLength(1);
  });

  it("SIGHUP: a new tool is served, a running call finishes under its old declaration, the next one uses the new", async () => {
    const before = service.received.length;
    const running = invoke("billing.create_invoice", { customerId: "cus_slow", amountCents: 5, slowMs: 1500 });
    await until("the slow call reaching the service", async () => service.received.length, (n) => n > before);
    writeFileSync(
      file,
      toolsYaml(service.url, "/v2/invoices", `  - name: crm.add_note\n    description: Add a note\n    upstream: { url: "${service.url}/notes", timeoutMs: 2000 }\n`),
    );
    server.signal("SIGHUP");
    await until("crm.add_note being served", listed, (ts) => ts.some((t) => t.name === "crm.add_note"));
    const slow = await running;
    expect(slow.status).toBe(200);
    expect(((await slow.json()) as { path: string }).path).toBe("/invoices");
    const next = await invoke("billing.create_invoice", { customerId: "cus_next", amountCents: 5 });
    expect(((await next.json()) as { path: string }).path).toBe("/v2/invoices");
    expect((await invoke("crm.add_note", { text: "hello" })).status).toBe(200);
    expect(server.output()).toMatch(/reloaded .*idemgate\.config\.yaml: 3 tools, 1 MCP servers/);
  });

  it("SIGHUP with a broken file: the old tools are still served and the log says why", async () => {
    writeFileSync(file, toolsYaml(service.url, "/v3/invoices").replace("minimum: 1", "minimun: 1"));
    server.signal("SIGHUP");
    await until("the refusal in the log", async () => server.output(), (out) => out.includes("was refused"));
    expect(server.output()).toContain("tools[0].inputSchema.properties.amountCents.minimun: is not a JSON Schema keyword");
    const tools = await listed();
    expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(["billing.create_invoice", "crm.add_note", "payments.charge_card"]));
    const call = await invoke("billing.create_invoice", { customerId: "cus_after", amountCents: 5 });
    expect(call.status).toBe(200);
    expect(((await call.json()) as { path: string }).path).toBe("/v2/invoices");
    expect((await invoke("billing.create_invoice", { customerId: "cus_after", amountCents: 0 })).status).toBe(400);
  });
});
