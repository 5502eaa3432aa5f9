import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { openDatabase, type Database } from "@/lib/db/database";
import { createTestPostgres, type TestPostgres } from "@/test/support/databases";
import { deliverDue } from "./deliver";
import { eventsForOpenedAnomalies, type WebhookEvent } from "./events";
import { claimDueDeliveries, enqueueEvents, purgeDeliveries } from "./outbox";
import { SIGNATURE_HEADER, verifySignature } from "./signature";
import { webhookEndpointSchema, type WebhookEndpoint } from "./webhook-config";

// The outbox against a real PostgreSQL server, with a local receiver that checks every signature.

interface Receiver {
  url: string;
  server: Server;
  /** endpoint path → event id → deliveries seen */
  seen: Map<string, Map<string, number>>;
  badSignatures: number;
  /** answers for the next requests (then 200) */
  answers: number[];
}

function startReceiver(secrets: Record<string, string>): Promise<Receiver> {
  const r: Receiver = { url: "", server: null as unknown as Server, seen: new Map(), badSignatures: 0, answers: [] };
  r.server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks).toString("utf8");
    const name = (req.url ?? "").slice(1);
    const check = verifySignature(req.headers[SIGNATURE_HEADER.toLowerCase()] as string | undefined, body, secrets[name]);
    if (!check.ok) {
      r.badSignatures++;
      res.writeHead(400).end(check.reason);
      return;
    }
    const status = r.answers.shift() ?? 200;
    if (status === 200) {
      const id = (JSON.parse(body) as { id: string }).id;
      expect(req.headers["idemgate-event-id"]).toBe(id);
      const perEndpoint = r.seen.get(name) ?? new Map<string, number>();
      perEndpoint.set(id, (perEndpoint.get(id) ?? 0) + 1);
      r.seen.set(name, perEndpoint);
    }
    res.writeHead(status).end();
  });
  return new Promise((resolve) =>
    r.server.listen(0, "127.0.0.1", () => {
      r.url = `http://127.0.0.1:${(r.server.address() as AddressInfo).port}`;
      resolve(r);
    }),
  );
}

const endpoint = (name: string, url: string, secret: string, extra: Partial<WebhookEndpoint> = {}): WebhookEndpoint => ({
  ...webhookEndpointSchema.parse({ name, url: `${url}/${name}`, secret }),
  ...extra,
});

function anomalies(n: number) {
  return Array.from({ length: n }, (_, i) => ({
    id: `a${i}`,
    type: "orphan_unknown_outcome",
    dedupeKey: `unknown_outcome:e${i}`,
    tool: "payments.charge",
    scope: "demo",
    key: `k${i}`,
    summary: `call ${i} may or may not have happened`,
    evidence: { cause: i % 2 === 0 ? "reported" : "silent", executionId: `e${i}` },
    detectedAt: new Date(),
  }));
}

describe("the webhook outbox", () => {
  let pg: TestPostgres;
  let second: Database;
  let receiver: Receiver;
  const SECRETS = { ops: "whsec_ops_0123456789abcdef", audit: "whsec_audit_0123456789abcd" };

  beforeAll(async () => {
    pg = await createTestPostgres("webhook_outbox");
    // a second connection pool: another server process
    second = await openDatabase({ url: pg.url });
    receiver = await startReceiver(SECRETS);
  });
  afterAll(async () => {
    receiver?.server.close();
    await second?.close();
    await pg?.drop();
  });
  beforeEach(async () => {
    await pg.db.prisma.webhookDelivery.deleteMany();
    receiver.seen.clear();
    receiver.badSignatures = 0;
    receiver.answers = [];
  });

  it("queues each event once per endpoint that asked for its type, however often it is queued", async () => {
    const events = eventsForOpenedAnomalies(anomalies(4));
    expect(events.map((e) => e.type)).toEqual(["key.unknown", "anomaly.opened", "key.stuck", "anomaly.opened", "key.unknown", "anomaly.opened", "key.stuck", "anomaly.opened"]);
    const endpoints = [endpoint("ops", receiver.url, SECRETS.ops), endpoint("audit", receiver.url, SECRETS.audit, { events: ["key.stuck"] })];
    expect(await enqueueEvents(pg.db.prisma, endpoints, events)).toBe(10);
    expect(await enqueueEvents(second.prisma, endpoints, events)).toBe(0);
    expect(await pg.db.prisma.webhookDelivery.count({ where: { endpoint: "audit" } })).toBe(2);
  });

  it("two processes delivering at once send every event once per endpoint, each signed", async () => {
    const endpoints = [endpoint("ops", receiver.url, SECRETS.ops), endpoint("audit", receiver.url, SECRETS.audit)];
    const events = eventsForOpenedAnomalies(anomalies(30));
    await enqueueEvents(pg.db.prisma, endpoints, events);
    const rounds = (db: Database, owner: string) =>
      Promise.all(Array.from({ length: 3 }, (_, i) => deliverDue(db.prisma, endpoints, { owner: `${owner}-${i}`, limit: 7 })));
    // until the outbox is empty, both "processes" three rounds at a time
    for (let i = 0; i < 20 && (await pg.db.prisma.webhookDelivery.count({ where: { status: "pending" } })) > 0; i++) {
      await Promise.all([rounds(pg.db, "a"), rounds(second, "b")]);
    }
    expect(receiver.badSignatures).toBe(0);
    for (const name of ["ops", "audit"]) {
      const seen = receiver.seen.get(name)!;
      expect(seen.size).toBe(events.length);
      expect([...seen.values()].every((n) => n === 1)).toBe(true);
    }
    expect(await pg.db.prisma.webhookDelivery.count({ where: { status: "delivered", attempts: 1 } })).toBe(2 * events.length);
  });

  it("never hands a row to a second claimer while the first one's lease runs", async () => {
    const endpoints = [endpoint("ops", receiver.url, SECRETS.ops)];
    await enqueueEvents(pg.db.prisma, endpoints, eventsForOpenedAnomalies(anomalies(1)).slice(0, 1));
    const nowMs = Date.now();
    const claim = (db: Database, owner: string, at: number) => claimDueDeliveries(db.prisma, { owner, endpoints: ["ops"], limit: 10, leaseMs: 60_000, nowMs: at });
    const [a, b] = await Promise.all([claim(pg.db, "a", nowMs), claim(second, "b", nowMs)]);
    expect(a.length + b.length).toBe(1);
    expect(await claim(second, "c", nowMs + 59_000)).toEqual([]);
    // the holder died: after its lease the row is claimed again, as attempt 2
    expect((await claim(second, "c", nowMs + 60_000)).map((d) => d.attempts)).toEqual([2]);
  });

  it("retries after the endpoint answers 500, after the backoff, and keeps both attempts in the log", async () => {
    const endpoints = [endpoint("ops", receiver.url, SECRETS.ops, { retryBackoffMs: 300 })];
    const [event] = eventsForOpenedAnomalies(anomalies(1)) as [WebhookEvent];
    await enqueueEvents(pg.db.prisma, endpoints, [event]);
    receiver.answers = [500];
    expect(await deliverDue(pg.db.prisma, endpoints, { owner: "a" })).toMatchObject({ claimed: 1, retrying: 1 });
    // not due again before its backoff
    expect(await deliverDue(pg.db.prisma, endpoints, { owner: "a" })).toMatchObject({ claimed: 0 });
    await sleep(400);
    expect(await deliverDue(pg.db.prisma, endpoints, { owner: "a" })).toMatchObject({ claimed: 1, delivered: 1 });
    const row = await pg.db.prisma.webhookDelivery.findFirstOrThrow();
    expect(row).toMatchObject({ status: "delivered", attempts: 2, lastStatus: 200, lastError: null });
    expect((row.log as { status: number }[]).map((a) => a.status)).toEqual([500, 200]);
    expect(receiver.seen.get("ops")?.get(event.id)).toBe(1);
  });

  it("gives up after the endpoint's attempts; an unreachable endpoint is an attempt without a status", async () => {
    // a port nothing listens on
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const endpoints = [endpoint("ops", `http://127.0.0.1:${port}`, SECRETS.ops, { retryBackoffMs: 1, maxAttempts: 2 })];
    await enqueueEvents(pg.db.prisma, endpoints, eventsForOpenedAnomalies(anomalies(1)).slice(0, 1));
    await deliverDue(pg.db.prisma, endpoints, { owner: "a" });
    await sleep(20);
    const lines: string[] = [];
    expect(await deliverDue(pg.db.prisma, endpoints, { owner: "a", log: (l) => lines.push(l) })).toMatchObject({ failed: 1 });
    const row = await pg.db.prisma.webhookDelivery.findFirstOrThrow();
    expect(row).toMatchObject({ status: "failed", attempts: 2, lastStatus: null, lastError: "ECONNREFUSED" });
    expect(lines.join("\n")).not.toContain(SECRETS.ops);
  });

  it("purges finished deliveries past the retention, never pending ones", async () => {
    const endpoints = [endpoint("ops", receiver.url, SECRETS.ops)];
    const old = Date.now() - 40 * 86_400_000;
    await enqueueEvents(pg.db.prisma, endpoints, eventsForOpenedAnomalies(anomalies(3)), old);
    const [a, b] = await pg.db.prisma.webhookDelivery.findMany({ orderBy: { id: "asc" }, take: 2 });
    await pg.db.prisma.webhookDelivery.update({ where: { id: a.id }, data: { status: "delivered" } });
    await pg.db.prisma.webhookDelivery.update({ where: { id: b.id }, data: { status: "failed" } });
    expect(await purgeDeliveries(pg.db.prisma, new Date(Date.now() - 30 * 86_400_000))).toBe(2);
    expect(await pg.db.prisma.webhookDelivery.count({ where: { status: "pending" } })).toBe(4);
  });
});
