import type { PrismaClient } from "@/generated/prisma/client";
import type { KeyRecord } from "@/lib/idempotency/record";
import type { KeyStore } from "@/lib/idempotency/key-store";
import type { NewAnomaly } from "../anomaly-types";
import { analyzeGaps, type GapAnalysis } from "@/lib/audit/retry-gaps";
import type { Position, ScanCursor, ScanName } from "../scan-cursor";

/**
 * What the engine (lib/idempotency/engine.ts) answers the reconciler about keys the key store lost
 * while the audit log still knows their calls: the engine's own recovery, so a finding says what
 * a retry will really be told.
 */
export interface AuditRecovery {
  /** whether a retry of this execution's call, arriving now at a key the store has no record of, gets its result back from the log */
  retryRestores(scope: string, key: string, executionId: string, nowMs: number): Promise<boolean>;
  /** a key the store has no record of while the log holds its call open: held again as unknown for that call (the key's record now, or null) */
  restoreHeld(scope: string, key: string, nowMs: number): Promise<KeyRecord | null>;
}

/** What every check of a pass gets. */
export interface CheckContext {
  prisma: PrismaClient;
  store: KeyStore;
  recovery: AuditRecovery;
  nowMs: number;
  /** the beginning of the lookback window */
  since: Date;
  /** rows a scan examines per pass */
  batch: number;
  /** rows older than this have been written (see nextPosition) */
  settledAt: Date;
  /** the stored cursor of a scan, as the previous pass left it */
  cursor(name: ScanName): ScanCursor | undefined;
  /**
   * a tool's replay gaps in one scope, of the last seven days (read once per pass, tool and scope):
   * what a check learns about a tenant's retries comes from that tenant's replays only
   */
  retryGaps(tool: string, scope: string): Promise<GapAnalysis>;
}

export interface CheckResult {
  /** rows (or side effects) this check read */
  examined: number;
  flagged: NewAnomaly[];
  /** intents whose lost outcome was filled in from the key store */
  backfilled?: number;
  /** where its scans continue next pass; saved once its findings are stored */
  cursors: Partial<Record<ScanName, ScanCursor>>;
}

export const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

/** A time in an anomaly's summary, as the console shows times: 2026-01-31 14:03:09 UTC */
export function shownAt(d: Date): string {
  const text = d.toISOString();
  return `${text.slice(0, 10)} ${text.slice(11, 19)} UTC`;
}

/** "a" or "an" before a name, by its first letter: "an email.send call", "a payments.charge call" */
export function withArticle(name: string): string {
  return `${/^[aeiou]/i.test(name) ? "an" : "a"} ${name}`;
}

export const positionOf = <T extends { id: string }>(rows: T[], time: (row: T) => Date): Position | null =>
  rows.length ? { at: time(rows[rows.length - 1]), id: rows[rows.length - 1].id } : null;

/** The key store's records of some keys, by `scope\nkey`, a hundred reads at a time. */
export async function storeRecords(store: KeyStore, pairs: { scope: string; key: string }[]): Promise<Map<string, KeyRecord | null>> {
  const out = new Map<string, KeyRecord | null>();
  for (let i = 0; i < pairs.length; i += 100) {
    const chunk = pairs.slice(i, i + 100);
    const records = await Promise.all(chunk.map((p) => store.get(p.scope, p.key)));
    chunk.forEach((p, j) => out.set(recordKey(p), records[j]));
  }
  return out;
}

export const recordKey = (p: { scope: string; key: string }) => `${p.scope}\n${p.key}`;

/** Replays whose gaps a tool's analysis reads at most (the newest), as the tool page does. */
export const GAP_SAMPLES = 20_000;

/**
 * Each (tool, scope)'s replay gaps of the seven days before `nowMs`, analysed once per pass.
 *
 * Per scope, not per tool: the retry window of fresh-key duplicates and the stale-suppression
 * threshold shape what is flagged for a tenant, and one tenant's replays (say, fast retries that
 * narrow a tool's retry cluster) must not change what is flagged for another. A scope with fewer
 * than MIN_SAMPLES replays of a tool gets the default retry window (retryWindow) and a stale
 * threshold from its own few gaps, never below MIN_STALE_THRESHOLD_MS; the other scopes' replays
 * are never a fallback, since that would bring the cross-tenant influence back.
 */
export function retryGapsOf(prisma: PrismaClient, nowMs: number): (tool: string, scope: string) => Promise<GapAnalysis> {
  const analyses = new Map<string, Promise<GapAnalysis>>();
  return (tool, scope) => {
    const name = `${tool}\n${scope}`;
    let analysis = analyses.get(name);
    if (!analysis) {
      analysis = prisma.suppression
        .findMany({
          where: { tool, scope, kind: "replay", gapMs: { not: null }, at: { gte: new Date(nowMs - 7 * 86_400_000) } },
          select: { gapMs: true },
          orderBy: { at: "desc" },
          take: GAP_SAMPLES,
        })
        .then((rows) => analyzeGaps(rows.map((r) => r.gapMs!)));
      analysis.catch(() => analyses.delete(name));
      analyses.set(name, analysis);
    }
    return analysis;
  };
}
