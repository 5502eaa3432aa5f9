import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { verifySignature } from "@/lib/notifications/signature";
import { testPort } from "@/scripts/test-ports.mjs";
import { createTestPostgres, type TestPostgres } from "@/test/support/databases";
import { removeDataDir, startServer, type RunningServer } from "@/test/support/server";

// Two production servers (scripts/serve.mjs) on one PostgreSQL, both running the reconciler every
// second, both declaring the same webhook endpoints in their configuration file: a local receiver
// checks every request's signature and sees each event once per endpoint, whichever server found
// it and whichever delivered it, including one that its first attempt was answered 500.
// Ports 3191–3192 are this file's (moved by IDEMGATE_TEST_PORT_BASE).

const SECRETS = { ops: `whsec_${randomUUID()}`, chat: `whsec_${randomUUID()}` };
const LEASE_MS = 1_500;

interface Receiver {
  server: Server;
  url: string;
  /** endpoint → event id → times delivered (answered 200) */
  seen: Record<string, Map<string, number>>;
  types: Map<string, string>;
  rejected: string[];
  requests: number;
}

function startReceiver(): Promise<Receiver> {
  const r: Receiver = { server: null as unknown as Server, url: "", seen: { ops: new Map(), chat: new Map() }, types: new Map(), rejected: [], requests: 0 };
  let firstOps = true;
  r.server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks).toString("utf8");
    const name = (req.url ?? "").slice(1) as keyof typeof SECRETS;
    r.requests++;
    const check = verifySignature(req.headers["idemgate-signature"] as string | undefined, body, SECRETS[name] ?? "");
    if (!check.ok) {
      r.rejected.push(`${name}: ${check.reason}`);
      res.writeHead(400).end();
      return;
    }
    if (name === "ops" && firstOps) {
      // the first delivery fails: it is retried, and still counted once
      firstOps = false;
      res.writeHead(500).end();
      return;
    }
    const id = req.headers["idemgate-event-id"] as string;
    const parsed = JSON.parse(body) as { id?: string; type?: string; text?: string };
    if (name === "ops") expect(parsed.id).toBe(id);
    else expect(parsed.text).toEqual(expect.any(String));
    r.types.set(id, req.headers["idemgate-event-type"] as string);
    r.seen[name].set(id, (r.seen[name].get(id) ?? 0) + 1);
    res.writeHead(200).end();
  });
  return new Promise((resolve) =>
    r.server.listen(0, "127.0.0.1", () => {
      r.url = `http://127.0.0.1:${(r.server.address() as AddressInfo).port}`;
      resolve(r);
    }),
  );
}

const configYaml = (receiver: string) => `
tools:
  - name: jobs.send_invoice
    runs: client
    description: Send an invoice from the billing job
    inputSchema: { type: object, required: [invoiceId], properties: { invoiceId: { type: string } } }
    leaseMs: ${LEASE_MS}
webhooks:
  - name: ops
    url: ${receiver}/ops
    secret: \${FAULT_OPS_HOOK_SECRET}
    retryBackoffMs: 300
  - name: chat
    url: ${receiver}/chat
    secret: \${FAULT_CHAT_HOOK_SECRET}
    format: slack
    events: [key.unknown, key.stuck]
`;

describe("webhooks from two server processes running the reconciler", () => {
  const ports = [testPort(3191), testPort(3192)];
  const dir = mkdtempSync(path.join(tmpdir(), "idemgate-webhooks-"));
  let pg: TestPostgres;
  let receiver: Receiver;
  const servers: RunningServer[] = [];
  let token: string;

  beforeAll(async () => {
    receiver = await startReceiver();
    pg = await createTestPostgres("fault_webhooks");
    const file = path.join(dir, "idemgate.config.yaml");
    writeFileSync(file, configYaml(receiver.url));
    const env = {
      DATABASE_URL: pg.url,
      IDEMGATE_SECRET: randomUUID() + randomUUID(),
      IDEMGATE_CONFIG: file,
      IDEMGATE_DEMO_TOOLS: "0",
      IDEMGATE_RECONCILE_INTERVAL_MS: "1000",
      IDEMGATE_WEBHOOK_POLL_MS: "250",
      FAULT_OPS_HOOK_SECRET: SECRETS.ops,
      FAULT_CHAT_HOOK_SECRET: SECRETS.chat,
    };
    for (const port of ports) {
      await removeDataDir(`.data/fault-webhooks-${port}`);
      servers.push(await startServer({ port, dataDir: `.data/fault-webhooks-${port}`, env }));
    }
    token = (await servers[0].credentials()).apiToken;
  }, 240_000);

  afterAll(async () => {
    for (const server of servers) await server.stop();
    receiver?.server.close();
    await pg?.drop();
    for (const port of ports) await removeDataDir(`.data/fault-webhooks-${port}`);
    rmSync(dir, { recursive: true, force: true });
  });

  async function reserve(server: RunningServer, key: string): Promise<{ executionId: string; token: number }> {
    const res = await fetch(`${server.url}/api/v1/tools/jobs.send_invoice/reservations`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json", "idempotency-key": key },
      body: JSON.stringify({ arguments: { invoiceId: key } }),
    });
    expect(res.status).toBe(201);
    return (await res.json()) as { executionId: string; token: number };
  }

  it("delivers each event once per endpoint, every request signed", async () => {
    const unknown = Array.from({ length: 4 }, (_, i) => `unknown-${i}-${randomUUID()}`);
    const stuck = Array.from({ length: 3 }, (_, i) => `stuck-${i}-${randomUUID()}`);
    for (const [i, key] of unknown.entries()) {
      const server = servers[i % 2];
      const held = await reserve(server, key);
      const res = await fetch(`${server.url}/api/v1/executions/${held.executionId}/release`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ token: held.token, outcome: "unknown", note: "the invoice service timed out" }),
      });
      expect(res.status).toBe(200);
    }
    // reserved and never completed: stuck once the lease passes
    for (const [i, key] of stuck.entries()) await reserve(servers[i % 2], key);

    // 7 anomalies: ops gets 14 events (key.* and anomaly.opened), chat 7 (key.* only)
    const deadline = Date.now() + 60_000;
    while (receiver.seen.ops.size < 14 || receiver.seen.chat.size < 7) {
      if (Date.now() > deadline) throw new Error(`not every event arrived: ops ${receiver.seen.ops.size}/14, chat ${receiver.seen.chat.size}/7\n${servers.map((s) => s.output()).join("\n")}`);
      await sleep(250);
    }
    // more reconciler passes and delivery rounds in both processes: nothing more may arrive
    await sleep(3_000);

    expect(receiver.rejected).toEqual([]);
    for (const name of ["ops", "chat"] as const) {
      expect([...receiver.seen[name].entries()].filter(([, n]) => n !== 1)).toEqual([]);
    }
    expect(receiver.seen.ops.size).toBe(14);
    expect(receiver.seen.chat.size).toBe(7);
    const types = [...receiver.seen.ops.keys()].map((id) => receiver.types.get(id)).sort();
    expect(types).toEqual([...Array(7).fill("anomaly.opened"), ...Array(3).fill("key.stuck"), ...Array(4).fill("key.unknown")]);
    // one more request than deliveries: the first, answered 500, was retried
    expect(receiver.requests).toBe(14 + 7 + 1);

    // the outbox: one row per (endpoint, event), all delivered, the retried one after two attempts
    const rows = await pg.db.prisma.webhookDelivery.findMany();
    expect(rows).toHaveLength(21);
    expect(rows.every((r) => r.status === "delivered" && r.leaseOwner === null)).toBe(true);
    expect(rows.map((r) => r.attempts).sort()).toEqual([...Array(20).fill(1), 2]);
    // the anomalies were found once each, by whichever process got there first
    expect(await pg.db.prisma.anomaly.count()).toBe(7);
  }, 120_000);

  it("a request with a bad signature is refused by the verifier receivers use", async () => {
    const body = JSON.stringify({ id: "evt_forged", type: "key.unknown" });
    const t = Math.floor(Date.now() / 1000);
    expect(verifySignature(`t=${t},v1=${"ab".repeat(32)}`, body, SECRETS.ops)).toEqual({ ok: false, reason: "no signature matches the body" });
    const res = await fetch(`${receiver.url}/ops`, { method: "POST", headers: { "idemgate-signature": `t=${t},v1=${"ab".repeat(32)}`, "idemgate-event-id": "evt_forged" }, body });
    expect(res.status).toBe(400);
    expect(receiver.seen.ops.has("evt_forged")).toBe(false);
  });
});
