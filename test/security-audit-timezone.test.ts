import { randomUUID } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PrismaAuditWriter } from "@/lib/audit/audit-writer";
import { openDatabase, type Database } from "@/lib/db/database";
import { createTestPostgres, POSTGRES_ADMIN_URL, type TestPostgres } from "@/test/support/databases";

/**
 * Audit times are `timestamp(3)` columns holding UTC, read by Prisma as UTC. On a server whose
 * TimeZone is not UTC, the audit writer's SQL must still store the same instants: else started_at
 * and expires_at move by hours and recovery after a key-store loss misses executions.
 */

let pgTest: TestPostgres;
let db: Database;
let bare: pg.Client;

beforeAll(async () => {
  pgTest = await createTestPostgres("audit_tz");
  const admin = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
  await admin.connect();
  const name = new URL(pgTest.url).pathname.slice(1);
  await admin.query(`ALTER DATABASE "${name}" SET timezone TO 'America/New_York'`);
  await admin.end();
  // opened after the change: its connections start in New York time unless the gateway says otherwise
  db = await openDatabase({ url: pgTest.url, migrate: false });
  bare = new pg.Client({ connectionString: pgTest.url });
  await bare.connect();
});

afterAll(async () => {
  await bare?.end();
  await db?.close();
  await pgTest?.drop();
});

const intent = (startedAt: Date) => ({
  id: randomUUID(),
  scope: "tz",
  key: `k-${randomUUID()}`,
  tool: "payments.charge",
  fingerprint: "f",
  token: 1,
  session: null,
  caller: null,
  fallback: false,
  startedAt,
  leaseUntil: new Date(startedAt.getTime() + 30_000),
});

async function writeAndReadBack(execute: (sql: string, params: readonly unknown[]) => Promise<number>) {
  const writer = new PrismaAuditWriter(db.prisma, { execute });
  const startedAt = new Date("2026-07-01T12:00:00.123Z");
  const alone = intent(startedAt);
  const grouped = [intent(new Date(startedAt.getTime() + 1)), intent(new Date(startedAt.getTime() + 2))];
  await writer.intent(alone);
  await Promise.all(grouped.map((g) => writer.intent(g)));
  const finishedAt = new Date(startedAt.getTime() + 500);
  const expiresAt = new Date(startedAt.getTime() + 86_400_000);
  writer.outcome({ id: alone.id, outcome: "succeeded", finishedAt, durationMs: 500, resultStatus: 200, resultBody: "{}", resultFinal: true, expiresAt, error: null });
  await writer.flush();
  await writer.close();

  const rows = await db.prisma.execution.findMany({ where: { scope: "tz", id: { in: [alone.id, ...grouped.map((g) => g.id)] } } });
  const byId = new Map(rows.map((r) => [r.id, r]));
  expect(rows).toHaveLength(3);
  for (const written of [alone, ...grouped]) {
    expect(byId.get(written.id)!.startedAt.toISOString()).toBe(written.startedAt.toISOString());
    expect(byId.get(written.id)!.leaseUntil.toISOString()).toBe(written.leaseUntil.toISOString());
  }
  expect(byId.get(alone.id)!.finishedAt!.toISOString()).toBe(finishedAt.toISOString());
  expect(byId.get(alone.id)!.expiresAt!.toISOString()).toBe(expiresAt.toISOString());
  await db.prisma.execution.deleteMany({ where: { scope: "tz" } });
}

describe("audit times on a server whose TimeZone is America/New_York", () => {
  it("the gateway's own connections run in UTC", async () => {
    const [row] = await db.withSession((conn) => conn.query<{ TimeZone: string }>("SHOW TimeZone"));
    expect(row.TimeZone).toBe("UTC");
  });

  it("intents (alone and grouped), outcomes and expiry read back through Prisma as the same instants", async () => {
    await writeAndReadBack(db.execute);
  });

  it("the writer's SQL keeps them so even over a connection left in New York time", async () => {
    const { rows } = await bare.query("SHOW TimeZone");
    expect(rows[0].TimeZone).toBe("America/New_York");
    await writeAndReadBack(async (sql, params) => (await bare.query(sql, params as unknown[])).rowCount ?? 0);
  });
});
