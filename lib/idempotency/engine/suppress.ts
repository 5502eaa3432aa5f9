import { randomUUID } from "node:crypto";
import type { SuppressionKind } from "../audit-port";
import { ConflictError, MismatchError, StuckKeyError, UnavailableError, UnknownOutcomeKeyError } from "../errors";
import type { KeyRecord } from "../record";
import type { CallContext } from "./call";
import type { EngineCore } from "./core";
import type { ClientReplay, InvokeResult } from "./types";

/** Records a suppression and answers it: the stored result, or the matching error. */
export function suppressed(core: EngineCore, kind: SuppressionKind, record: KeyRecord, call: CallContext): InvokeResult {
  if (kind === "replay" && !call.trace.cached) core.replayCache?.remember(record, call.arrivedMs);
  const gapMs = Math.max(0, call.arrivedMs - record.createdAtMs);
  core.audit.suppression({
    id: randomUUID(),
    scope: call.scope,
    key: call.key,
    tool: call.tool.name,
    kind,
    fallback: call.fallback,
    gapMs,
    session: call.session,
    caller: call.caller,
    transport: call.transport,
    originalSession: record.session,
    originalExecutionId: record.executionId,
    at: new Date(call.arrivedMs),
  });
  call.trace.result = kind;
  switch (kind) {
    case "replay":
    case "fresh_key": {
      const result = record.result;
      if (!result) throw new Error(`done record without a result: ${call.scope}/${call.key}`);
      return { kind: "replayed", status: result.status, body: result.body, key: call.key, record, gapMs, fallback: call.fallback };
    }
    case "conflict":
      throw new ConflictError(record);
    case "stuck":
      throw new StuckKeyError(record);
    case "unknown":
      throw new UnknownOutcomeKeyError(record);
    case "mismatch":
      throw new MismatchError(record);
  }
}

/** Keys a report of client replays reads from the store at once. */
const CLIENT_REPLAY_READS = 50;

/**
 * Replays a client answered from its own cache (lib/client), written to the audit log as the
 * suppressions the gateway would have written had each reached it: kind replay, the gap from the
 * original execution's start, the caller's session. An item is recorded only when its key in this
 * scope is done with the result of that execution and had not expired when the replay happened;
 * anything else (another scope's key, another execution, a key never done) is ignored and counted.
 */
export async function recordClientReplays(core: EngineCore, scope: string, caller: string | null, items: readonly ClientReplay[]): Promise<{ recorded: number; ignored: number }> {
  const nowMs = core.now();
  let recorded = 0;
  for (let i = 0; i < items.length; i += CLIENT_REPLAY_READS) {
    const batch = items.slice(i, i + CLIENT_REPLAY_READS);
    const records = await Promise.all(
      batch.map(async (item) => {
        const hitMs = nowMs - item.ageMs;
        const cached = core.replayCache?.get(scope, item.key, hitMs);
        if (cached) return cached;
        try {
          return await core.store.get(scope, item.key);
        } catch (err) {
          throw new UnavailableError("key_store", err);
        }
      }),
    );
    batch.forEach((item, j) => {
      const record = records[j];
      if (!record || record.status !== "done" || record.result === null || record.tool !== item.tool || record.executionId !== item.executionId) return;
      const atMs = Math.max(record.createdAtMs, nowMs - item.ageMs);
      if (record.expiresAtMs === null || record.expiresAtMs <= atMs) return;
      core.audit.suppression({
        id: randomUUID(),
        scope,
        key: item.key,
        tool: record.tool,
        kind: "replay",
        fallback: record.fallback,
        gapMs: atMs - record.createdAtMs,
        session: item.session ?? null,
        caller,
        transport: "http",
        originalSession: record.session,
        originalExecutionId: record.executionId,
        at: new Date(atMs),
      });
      // each one is a call answered (by the client, from its cache) as far as the figures go
      core.onCall({ tool: record.tool, result: "replay", storeMs: 0, auditMs: 0, cached: true });
      recorded++;
    });
  }
  return { recorded, ignored: items.length - recorded };
}
