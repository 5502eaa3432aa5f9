import { PASS_THROUGH_PREFIX } from "@/lib/idempotency/key-rules";
import { rowsAfter, startOf, type ScanCursor } from "../scan-cursor";
import { recordKey, storeRecords, type CheckContext } from "./context";

/**
 * Calls the audit log holds open — their outcome was unknown, or they never reported one and their
 * lease passed — whose key the key store has no record of (a Redis store that lost its data): each
 * is held again in the store as unknown for its execution, as a retry would hold it
 * (Engine.restoreHeld), so the key lists, the counts, the probes and the operators' decisions see
 * it. Open calls are few and stay open until decided, so the scan goes round all of them, `batch`
 * rows per pass (by lease end, then id), and starts over once it reached the end.
 */
export async function restoreHeldCalls(ctx: CheckContext): Promise<{ examined: number; restored: number; cursor: ScanCursor }> {
  const start = startOf(ctx.cursor("held_calls"), new Date(0));
  const rows = await ctx.prisma.execution.findMany({
    where: {
      AND: [
        { OR: [{ outcome: "unknown" }, { outcome: null, leaseUntil: { lte: new Date(ctx.nowMs) } }] },
        rowsAfter("leaseUntil", start),
        { NOT: { key: { startsWith: PASS_THROUGH_PREFIX } } },
      ],
    },
    select: { id: true, scope: true, key: true, leaseUntil: true },
    orderBy: [{ leaseUntil: "asc" }, { id: "asc" }],
    take: ctx.batch,
  });
  const records = await storeRecords(ctx.store, rows);
  let restored = 0;
  const done = new Set<string>();
  for (const e of rows) {
    const id = recordKey(e);
    if (records.get(id) || done.has(id)) continue;
    done.add(id);
    // restoreHeld reads the key's latest execution itself: an older call of a key decided since is left alone
    if (await ctx.recovery.restoreHeld(e.scope, e.key, ctx.nowMs)) restored++;
  }
  const full = rows.length >= ctx.batch;
  const last = rows[rows.length - 1];
  // a full page continues after its last row; otherwise the next pass starts over
  const cursor: ScanCursor = full && last ? { at: last.leaseUntil, id: last.id, caughtUp: false, roundStartedAt: null } : { at: new Date(0), id: "", caughtUp: true, roundStartedAt: null };
  return { examined: rows.length, restored, cursor };
}
