import { z } from "zod";
import { keyListFactsKey, readKeyListFacts } from "@/lib/audit/key-list-facts";
import { KEY_STATES, type KeyState } from "@/lib/idempotency/record";
import type { Runtime } from "@/lib/server/runtime";
import { cursorSeal } from "./list-cursor";
import { presentKey, type Audience, type KeyPage } from "./present-key";

export const KeyListQuery = z.object({
  state: z.enum(KEY_STATES as [KeyState, ...KeyState[]]).optional(),
  tool: z.string().min(1).max(200).optional(),
  scope: z.string().min(1).max(64).optional(),
  prefix: z.string().min(1).max(255).optional(),
  cursor: z.string().min(1).max(2_000).optional(),
  limit: z.coerce.number().int().min(1).max(500).default(50),
});
export type KeyListQuery = z.output<typeof KeyListQuery>;

/**
 * A page of keys, newest first, straight from the store's indexes. The store's cursor is sealed
 * for this listing's filters (lib/operator/list-cursor.ts): it names no key, and a cursor that was not
 * handed out for these filters is refused (InvalidCursorError, 400).
 */
export async function listKeys(
  runtime: Pick<Runtime, "config" | "store"> & { db?: Runtime["db"] },
  query: KeyListQuery,
  audience: Audience = "operator",
): Promise<KeyPage> {
  const nowMs = Date.now();
  const seal = cursorSeal(runtime.config);
  const filter = { state: query.state, tool: query.tool, scope: query.scope, prefix: query.prefix };
  const cursor = query.cursor === undefined ? undefined : seal.open(query.cursor, filter);
  const page = await runtime.store.list({ ...query, cursor, nowMs });
  // the stored status (a declined card is done with a 402) and the replays, from the audit log
  const facts = runtime.db ? await readKeyListFacts(runtime.db.prisma, page.items) : new Map();
  return {
    items: page.items.map((r) => {
      const f = facts.get(keyListFactsKey(r.scope, r.key));
      const view = presentKey(r, nowMs, false, audience);
      return { ...view, resultStatus: view.state === "done" || view.state === "expired" ? (f?.resultStatus ?? null) : null, replays: f?.replays ?? 0 };
    }),
    nextCursor: page.nextCursor === null ? null : seal.seal(page.nextCursor, filter),
  };
}
