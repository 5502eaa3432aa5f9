import { InvalidCursorError } from "@/lib/idempotency/errors";
import type { BeginInput, BeginOutcome, CompleteOutcome, KeyStore, ListPage, ListQuery, OperatorGuard, OperatorOutcome, StateCounts } from "@/lib/idempotency/key-store";
import { KEY_STATES, stateOf, type KeyRecord } from "@/lib/idempotency/record";
import { applyPatch, deadlineOf, decideBegin, holderPatch, holderRefusal, isPurgeable, isReplay, operatorPatch, operatorRefusal, reservationOf, type HolderChange, type OperatorChange } from "@/lib/idempotency/transitions";
import { ChangeWaiters } from "../change-waiters";
import { RuleChanges } from "../rule-changes";

/**
 * A KeyStore in one process's memory, built on the state rules (lib/idempotency/transitions.ts)
 * and nothing else: each operation reads the record, asks the rules, and applies their answer, in
 * one synchronous step (nothing else runs in between, so begin is atomic as the other stores'
 * are). It passes the whole key-store contract, and is the reference the Redis scripts are
 * checked against. It keeps nothing across restarts and shares nothing between processes: for
 * tests and tools, not a server.
 */
export class MemoryKeyStore extends RuleChanges implements KeyStore {
  readonly kind = "memory" as const;
  private readonly records = new Map<string, KeyRecord>();
  private lastToken = 0;
  private readonly waiters = new ChangeWaiters(() => ({ ready: Promise.resolve(), stop() {} }));

  async begin(input: BeginInput): Promise<BeginOutcome> {
    const existing = this.read(input.scope, input.key);
    const decision = decideBegin(existing, input, input.nowMs);
    if (decision.kind !== "reserve") return { kind: decision.kind, record: copy(existing!) };
    const record = reservationOf(input, ++this.lastToken);
    this.write(record, decision.replaces !== null);
    return { kind: "reserved", token: record.token, record: copy(record), takenOver: decision.takenOver && copy(decision.takenOver), storeEpochMs: null };
  }

  async peekReplay(scope: string, key: string, fingerprint: string, nowMs: number): Promise<KeyRecord | null> {
    const record = this.read(scope, key);
    return isReplay(record, fingerprint, nowMs) ? copy(record!) : null;
  }

  async get(scope: string, key: string): Promise<KeyRecord | null> {
    const record = this.read(scope, key);
    return record && copy(record);
  }

  /**
   * Newest first: by deadline within a state (deadlineOf), by creation time otherwise; ties by
   * (scope, key) descending. The cursor is the last row's position; the next page starts after it.
   */
  async list(query: ListQuery): Promise<ListPage> {
    const limit = Number.isFinite(query.limit) ? Math.max(1, Math.trunc(query.limit)) : 1;
    const sortOf = (r: KeyRecord) => (query.state ? deadlineOf(r) : r.createdAtMs);
    const after = query.cursor ? decodeCursor(query.cursor) : null;
    const rows = [...this.records.values()]
      .filter(
        (r) =>
          (query.state === undefined || stateOf(r, query.nowMs) === query.state) &&
          (query.tool === undefined || r.tool === query.tool) &&
          (query.scope === undefined || r.scope === query.scope) &&
          (!query.prefix || r.key.startsWith(query.prefix)) &&
          (after === null || comparePositions([sortOf(r), r.scope, r.key], after) < 0),
      )
      .sort((a, b) => comparePositions([sortOf(b), b.scope, b.key], [sortOf(a), a.scope, a.key]));
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    const nextCursor = rows.length > limit ? encodeCursor([sortOf(last), last.scope, last.key]) : null;
    return { items: page.map((r) => ({ ...copy(r), result: null })), nextCursor };
  }

  async counts(nowMs: number, filter: { tool?: string; scope?: string } = {}): Promise<StateCounts> {
    const counts = Object.fromEntries(KEY_STATES.map((state) => [state, 0])) as StateCounts;
    for (const r of this.records.values()) {
      if ((filter.tool === undefined || r.tool === filter.tool) && (filter.scope === undefined || r.scope === filter.scope)) {
        counts[stateOf(r, nowMs)]++;
      }
    }
    return counts;
  }

  async purge(olderThanMs: number, batch?: number): Promise<number> {
    void batch; // one pass: nothing else runs meanwhile
    let purged = 0;
    for (const [id, r] of this.records) {
      if (isPurgeable(r, olderThanMs)) {
        this.records.delete(id);
        purged++;
      }
    }
    return purged;
  }

  async waitForChange(scope: string, key: string, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    return this.waiters.wait(idOf(scope, key), timeoutMs, signal, async () => this.read(scope, key)?.status === "inflight");
  }

  /** What a flush does to a store that can lose data (for tests of such a loss): every record gone; tokens keep increasing. */
  loseData(): void {
    this.records.clear();
  }

  async ping(): Promise<void> {}

  async close(): Promise<void> {
    this.waiters.close();
  }

  private read(scope: string, key: string): KeyRecord | null {
    return this.records.get(idOf(scope, key)) ?? null;
  }

  /** `announce`: tell waiters (a record replaced or changed; a new one is not announced: nobody waits on it) */
  private write(record: KeyRecord, announce: boolean): void {
    this.records.set(idOf(record.scope, record.key), record);
    if (announce) this.waiters.notify(idOf(record.scope, record.key));
  }

  private delete(scope: string, key: string): void {
    this.records.delete(idOf(scope, key));
    this.waiters.notify(idOf(scope, key));
  }

  protected async changeHeld(scope: string, key: string, token: number, change: HolderChange): Promise<CompleteOutcome> {
    const current = this.read(scope, key);
    const refusal = holderRefusal(current, token);
    if (refusal) return { ok: false, reason: refusal, current: current && copy(current) };
    const patch = holderPatch(change);
    if (patch === null) {
      this.delete(scope, key);
      return { ok: true, record: copy(current!) };
    }
    const record = applyPatch(current!, patch);
    this.write(record, record.status !== current!.status);
    return { ok: true, record: copy(record) };
  }

  protected async changeByOperator(scope: string, key: string, guard: OperatorGuard, change: OperatorChange): Promise<OperatorOutcome> {
    const current = this.read(scope, key);
    const refusal = operatorRefusal(current, guard);
    if (refusal) return { ok: false, reason: refusal, current: current && copy(current) };
    const before = copy(current!);
    const patch = operatorPatch(change, guard.nowMs);
    if (patch === null) {
      this.delete(scope, key);
      return { ok: true, before, after: null };
    }
    const after = applyPatch(current!, patch);
    this.write(after, true);
    return { ok: true, before, after: copy(after) };
  }
}

const idOf = (scope: string, key: string) => `${scope}\n${key}`;

/** Records leave the store as copies: a caller changing one changes nothing here. */
function copy(record: KeyRecord): KeyRecord {
  return { ...record, result: record.result && { ...record.result } };
}

type Position = [sort: number, scope: string, key: string];

function comparePositions(a: Position, b: Position): number {
  if (a[0] !== b[0]) return a[0] < b[0] ? -1 : 1;
  if (a[1] !== b[1]) return a[1] < b[1] ? -1 : 1;
  if (a[2] !== b[2]) return a[2] < b[2] ? -1 : 1;
  return 0;
}

function encodeCursor(position: Position): string {
  return Buffer.from(JSON.stringify(position), "utf8").toString("base64url");
}

function decodeCursor(cursor: string): Position {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    throw new InvalidCursorError();
  }
  if (!Array.isArray(parsed) || parsed.length !== 3 || typeof parsed[0] !== "number" || typeof parsed[1] !== "string" || typeof parsed[2] !== "string") {
    throw new InvalidCursorError();
  }
  return parsed as Position;
}
