import type { PrismaClient } from "@/generated/prisma/client";

/**
 * A side effect a tool really committed, as the tool itself recorded it. The reconciler compares
 * these with the audit log: an effect without a succeeded execution for its key is an orphan.
 */
export interface SideEffect {
  tool: string;
  scope: string;
  /** the idempotency key the effect ran under (`fallback:…` for fallback-deduplicated calls) */
  key: string | null;
  effectId: string;
  createdAt: Date;
}

/** A tool family's reconcile hook: the effects it committed at or after `since`, oldest first. */
export type ListEffects = (db: PrismaClient, since: Date) => Promise<SideEffect[]>;
