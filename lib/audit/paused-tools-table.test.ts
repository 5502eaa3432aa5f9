import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readPausedTool, readPausedTools } from "@/lib/audit/paused-tools-table";
import { createTestPglite, createTestPostgres } from "@/test/support/databases";
import type { Database } from "@/lib/db/database";

// The paused tools as every process reads them four times a second (through the driver, not
// Prisma): the same rows, in tool order, and each pause's time to the millisecond as Prisma wrote
// it, on a PostgreSQL server and on the embedded database.

for (const kind of ["postgres", "embedded"] as const) {
  describe(`readPausedTools (${kind})`, () => {
    let db: Database;
    let drop: () => Promise<void>;

    beforeAll(async () => {
      ({ db, drop } = kind === "postgres" ? await createTestPostgres("paused_read") : await createTestPglite());
    });
    afterAll(async () => {
      await drop?.();
    });

    it("reads nothing from an empty table, then every pause in tool order with its time to the millisecond", async () => {
      expect(await readPausedTools(db)).toEqual([]);
      const at = [new Date("2026-03-29T01:30:00.123Z"), new Date("2026-10-25T00:59:59.999Z")];
      await db.prisma.pausedTool.create({ data: { tool: "zeta.charge", reason: "PSP incident", actor: "ops@example.com", pausedAt: at[0] } });
      await db.prisma.pausedTool.create({ data: { tool: "alpha.mail", reason: "bounce storm", actor: "cli:ops@host", pausedAt: at[1] } });
      const read = await readPausedTools(db);
      expect(read).toEqual([
        { tool: "alpha.mail", reason: "bounce storm", actor: "cli:ops@host", pausedAtMs: at[1].getTime(), source: "operator" },
        { tool: "zeta.charge", reason: "PSP incident", actor: "ops@example.com", pausedAtMs: at[0].getTime(), source: "operator" },
      ]);
      // and as Prisma reads each one back
      for (const pause of read) expect(await readPausedTool(db.prisma, pause.tool)).toEqual(pause);
    });
  });
}
