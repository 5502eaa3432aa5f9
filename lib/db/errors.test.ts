import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestPglite, createTestPostgres } from "@/test/support/databases";
import type { Database } from "./database";
import { isUniqueViolation } from "./errors";

describe.each(["postgres", "pglite"] as const)("unique violations on %s", (kind) => {
  let db: Database;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    ({ db, drop } = kind === "postgres" ? await createTestPostgres("errors") : await createTestPglite());
  });
  afterAll(() => drop?.());

  it("are recognized from model and raw queries, and nothing else is", async () => {
    const row = { id: "op-1", email: "a@example.com", passwordHash: "x", role: "viewer", createdAt: new Date() };
    await db.prisma.operator.create({ data: row });
    const model = await db.prisma.operator.create({ data: { ...row, id: "op-2" } }).catch((e) => e);
    expect(isUniqueViolation(model)).toBe(true);
    const raw = await db.prisma.$executeRaw`INSERT INTO operators (id, email, password_hash, role, created_at) VALUES ('op-3', 'a@example.com', 'x', 'viewer', now())`.catch((e) => e);
    expect(isUniqueViolation(raw)).toBe(true);
    const other = await db.prisma.$executeRaw`INSERT INTO no_such_table VALUES (1)`.catch((e) => e);
    expect(isUniqueViolation(other)).toBe(false);
  });
});
