import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "@/lib/db/database";
import { createTestPglite, createTestPostgres } from "@/test/support/databases";
import { PrismaAuditWriter, type AuditWriterOptions } from "./audit-writer";

// The same statements through the database driver (as the server runs them) and through Prisma.
describe.each([
  ["PostgreSQL", "the driver"],
  ["PostgreSQL", "Prisma"],
  ["PGlite", "the driver"],
] as const)("audit writer on %s, statements through %s", (database, through) => {
  let pg: { db: Database; drop: () => Promise<void> };
  beforeAll(async () => {
    pg = database === "PostgreSQL" ? await createTestPostgres("audit_writer") : await createTestPglite();
  });
  afterAll(() => pg?.drop());
  const newWriter = (options: AuditWriterOptions) =>
    new PrismaAuditWriter(pg.db.prisma, { ...options, ...(through === "the driver" ? { execute: pg.db.execute } : {}) });

  const intent = (key: string, startedAt = new Date()) => ({
    id: randomUUID(), scope: "s", key, tool: "t", fingerprint: "f", token: 7, session: "x", caller: null, fallback: false,
    startedAt, leaseUntil: new Date(startedAt.getTime() + 60_000),
  });
  const outcome = (id: string) => ({
    id, outcome: "succeeded" as const, finishedAt: new Date(), durationMs: 3, resultStatus: 201, resultBody: '{"ok":1}', resultFinal: false,
    expiresAt: new Date(Date.now() + 60_000), error: null,
  });

  it("in async mode writes an intent and its outcome as one row, and answers lookups before it is written", async () => {
    const writer = newWriter({ mode: "async", flushIntervalMs: 60_000 });
    const i = intent("a");
    await writer.intent(i);
    expect(await writer.priorExecution("s", "a", new Date(0))).toMatchObject({ id: i.id, outcome: null });
    writer.outcome(outcome(i.id));
    expect(await writer.priorExecution("s", "a", new Date(0))).toMatchObject({ id: i.id, outcome: "succeeded", resultBody: '{"ok":1}' });
    expect(await pg.db.prisma.execution.count({ where: { key: "a" } })).toBe(0);
    writer.suppression({ id: randomUUID(), scope: "s", key: "a", tool: "t", kind: "replay", fallback: false, gapMs: 12, session: "y", caller: null, originalSession: "x", originalExecutionId: i.id, at: new Date() });
    await writer.close();
    const row = await pg.db.prisma.execution.findUnique({ where: { id: i.id } });
    expect(row).toMatchObject({ outcome: "succeeded", resultStatus: 201, resultBody: '{"ok":1}', token: 7n, session: "x" });
    expect(await pg.db.prisma.suppression.findFirst({ where: { key: "a" } })).toMatchObject({ kind: "replay", gapMs: 12, originalExecutionId: i.id });
  });

  it("in durable mode writes the intent at once and the outcome in a batch; a second open execution of a key is refused", async () => {
    const writer = newWriter({ mode: "durable", flushIntervalMs: 60_000 });
    const i = intent("b");
    await writer.intent(i);
    expect(await pg.db.prisma.execution.findUnique({ where: { id: i.id } })).toMatchObject({ outcome: null });
    await expect(writer.intent(intent("b"))).rejects.toThrow(/has not finished/);
    writer.outcome(outcome(i.id));
    // the queued outcome frees the key: the second intent writes the queue first and goes in
    await writer.intent(intent("b"));
    await writer.close();
    expect(await pg.db.prisma.execution.count({ where: { key: "b" } })).toBe(2);
    expect(await pg.db.prisma.execution.findUnique({ where: { id: i.id } })).toMatchObject({ outcome: "succeeded" });
  });
});
