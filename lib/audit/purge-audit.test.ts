import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestPostgres } from "@/test/support/databases";
import { deleteOrphanCopies, indexMissingArguments } from "./argument-index";
import { findExecutionsByArguments } from "./find-executions";
import { purgeAuditRows } from "./purge-audit";

describe("audit retention", () => {
  let pg: Awaited<ReturnType<typeof createTestPostgres>>;
  beforeAll(async () => {
    pg = await createTestPostgres("purge_audit");
  });
  afterAll(() => pg?.drop());

  it("deletes old rows in batches and keeps executions that never reported an outcome", async () => {
    const old = new Date(Date.now() - 40 * 86_400_000);
    const recent = new Date();
    const execution = (startedAt: Date, outcome: string | null, key: string) => ({
      id: randomUUID(), scope: "s", key, tool: "t", fingerprint: "f", token: 1n, startedAt, leaseUntil: startedAt, outcome,
    });
    await pg.db.prisma.execution.createMany({
      data: [
        ...Array.from({ length: 25 }, (_, i) => execution(old, "succeeded", `old-${i}`)),
        execution(old, null, "orphan"),
        execution(recent, "succeeded", "recent"),
      ],
    });
    await pg.db.prisma.suppression.createMany({
      data: [old, old, recent].map((at, i) => ({ id: randomUUID(), scope: "s", key: `k${i}`, tool: "t", kind: "replay", at })),
    });
    // arguments kept for resend probes (probe: resend) go with the audit trail, even of an unknown call
    await pg.db.prisma.upstreamResend.createMany({
      // more old ones than one batch (10)
      data: [...Array.from({ length: 12 }, () => old), recent].map((sentAt, i) => ({ executionId: randomUUID(), scope: "s", key: i === 12 ? "recent" : `r${i}`, tool: "t", arguments: "{}", sentAt })),
    });
    const purged = await purgeAuditRows(pg.db.prisma, new Date(Date.now() - 30 * 86_400_000), 10);
    expect(purged).toMatchObject({ executions: 25, suppressions: 2, resendArguments: 12 });
    expect((await pg.db.prisma.upstreamResend.findMany({ select: { key: true } })).map((r) => r.key)).toEqual(["recent"]);
    expect((await pg.db.prisma.execution.findMany({ select: { key: true } })).map((e) => e.key).sort()).toEqual(["orphan", "recent"]);
    expect(await pg.db.prisma.suppression.count()).toBe(1);
  });

  it("takes a call's kept arguments with it; one kept for want of an outcome keeps its fingerprint but not its arguments", async () => {
    const old = new Date(Date.now() - 40 * 86_400_000);
    const recent = new Date();
    const args = { customerId: "cus_purged", card: "[redacted]" };
    const execution = (startedAt: Date, outcome: string | null, key: string) => ({
      id: randomUUID(), scope: "args", key, tool: "t", fingerprint: "f", token: 1n, startedAt, leaseUntil: startedAt, outcome,
      arguments: args, argumentsKept: "redacted", answerStatus: outcome === null ? 503 : null, answerBody: outcome === null ? "down" : null,
    });
    await pg.db.prisma.execution.createMany({ data: [execution(old, "succeeded", "a-old"), execution(old, null, "a-open"), execution(recent, "succeeded", "a-recent")] });
    // the search's copies of their arguments, as the audit writer writes them
    expect(await indexMissingArguments(pg.db.prisma)).toBe(3);
    // and a copy whose execution is gone (nothing ties a copy to its execution in the database)
    const leftover = randomUUID();
    await pg.db.prisma.executionArgumentIndex.create({ data: { executionId: leftover, scope: "args", startedAt: old, arguments: args } });
    const purged = await purgeAuditRows(pg.db.prisma, new Date(Date.now() - 30 * 86_400_000), 10);
    expect(purged).toMatchObject({ executions: 1, keptArguments: 1 });
    const rows = await pg.db.prisma.execution.findMany({ where: { scope: "args" }, orderBy: { key: "asc" } });
    expect(rows.map((r) => [r.key, r.fingerprint, r.arguments, r.argumentsKept, r.answerBody])).toEqual([
      ["a-open", "f", null, null, null],
      ["a-recent", "f", args, "redacted", null],
    ]);
    // the copies go with their execution (deleted) and with its arguments (dropped): the search no longer finds them
    const copies = () => pg.db.prisma.executionArgumentIndex.findMany({ where: { scope: "args" }, select: { executionId: true, arguments: true }, orderBy: { executionId: "asc" } });
    expect(await copies()).toEqual(
      [
        { executionId: rows[1].id, arguments: args },
        { executionId: leftover, arguments: args },
      ].sort((a, b) => (a.executionId < b.executionId ? -1 : 1)),
    );
    // the left-behind copy goes with the background's sweep, a slice at a time, wherever it is in the order
    let after = "";
    let deleted = 0;
    do {
      const slice = await deleteOrphanCopies(pg.db.prisma, after, 1);
      deleted += slice.deleted;
      after = slice.next;
    } while (after !== "");
    expect(deleted).toBe(1);
    expect(await copies()).toEqual([{ executionId: rows[1].id, arguments: args }]);
    expect((await findExecutionsByArguments(pg.db, [JSON.stringify({ customerId: "cus_purged" })], "args", 50)).found.map((f) => f.key)).toEqual(["a-recent"]);
    expect(await indexMissingArguments(pg.db.prisma)).toBe(0);
  });
});
