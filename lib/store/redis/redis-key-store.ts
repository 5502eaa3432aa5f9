import { Cluster, Redis, type ClusterNode, type ClusterOptions, type RedisOptions } from "ioredis";
import { currentBucket, expiryBucket, type ResultBytesCounter } from "@/lib/idempotency/scope-result-limit";
import { KEY_STATES, STORED_STATUSES, stateOf, type KeyRecord, type KeyState, type StoredResult, type StoredStatus } from "@/lib/idempotency/record";
import type {
  BeginInput,
  BeginOutcome,
  CompleteOptions,
  CompleteOutcome,
  KeyStore,
  ListPage,
  ListQuery,
  OperatorGuard,
  OperatorOutcome,
  OperatorRefusal,
  StateCounts,
} from "@/lib/idempotency/key-store";
import { isReplay } from "@/lib/idempotency/transitions";
import { InvalidCursorError } from "@/lib/idempotency/errors";
import { decodeCursor, encodeCursor, mergeBucketPages, type BucketPage, type Position } from "./cursor";
import { ChangeWaiters, type Watch } from "../change-waiters";
import { coalesceWrites } from "./coalesce-writes";
import { UnexpectedRedisReplyError, UnsupportedFilterError } from "./errors";
import { BUCKETS, KeySpace, MEMBER_SEPARATOR, bucketOf, entryOfMember, escapeField, memberOf } from "./key-names";
import { decodeRecord, optionalArg, resultArgs, statusOfValue } from "./record-codec";
import { defineScripts, type CompleteReply, type PageReply } from "./scripts";

export interface RedisKeyStoreOptions {
  /** key prefix, default "idg"; no braces (it is part of the cluster hash tag) */
  prefix?: string;
}

const MAX_LIMIT = 1_000;
/** entries a list page may examine per bucket, as a multiple of the page size */
const READ_BUDGET_FACTOR = 20;
const DEFAULT_PURGE_BATCH = 500;

/**
 * Which stored status and deadline range a derived state is read from: the deadline after now
 * ("future"), up to now ("past"), or any ("all": an unknown record is held whatever the time; its
 * index is scored by unknownAtMs).
 */
const STATE_RANGES: Record<KeyState, { status: StoredStatus; range: "future" | "past" | "all" }> = {
  inflight: { status: "inflight", range: "future" }, // lease in the future
  stuck: { status: "inflight", range: "past" }, // lease passed
  unknown: { status: "unknown", range: "all" },
  done: { status: "done", range: "future" }, // expiry in the future
  expired: { status: "done", range: "past" }, // expiry passed
};

/** ZCOUNT/ZRANGEBYSCORE bounds of a state's range at `nowMs`: [max, min] */
function scoreBounds(range: "future" | "past" | "all", nowMs: number): [max: string, min: string] {
  if (range === "future") return ["+inf", `(${nowMs}`];
  if (range === "past") return [String(nowMs), "-inf"];
  return ["+inf", "-inf"];
}

/**
 * Where one list query reads in each bucket: one index (`scope` the scope whose own index it is, or
 * "" for an unknown-by-tool index), or the same index of every scope the bucket lists (`across`:
 * "created", "st:<status>" or "lx"; page-across-1.lua).
 */
type Source = { index: (bucket: number) => string; scope: string } | { across: string };

/** The part of one list query each bucket runs: an index and a score range, or a lex index. */
type Plan =
  | { mode: "score"; source: Source; max: number; maxInclusive: boolean; min: string; prefix: string; tool: string }
  | { mode: "lex"; source: Source; prefix: string; tool: string; fallback: Extract<Plan, { mode: "score" }> };

/**
 * KeyStore on Redis, one server or a Redis Cluster (ioredis `Cluster`). Each state change is one Lua
 * script on one bucket (one cluster slot, routed by the script's first key); lists and counts ask
 * every bucket in parallel (auto-pipelined per node) and merge. The store owns the client: close()
 * quits it.
 *
 * Changes are announced by the scripts themselves (PUBLISH on the record's change channel, see
 * KeySpace.changeChannel), so announcing costs no round trip. Waiters share one subscriber
 * connection, opened on the first wait: a duplicate of the client on one server; on a cluster the
 * Cluster client's own subscriber connection (to one node; PUBLISH reaches every node). It
 * subscribes to a record's channel while someone waits on it, and ioredis subscribes again after
 * a reconnect; what is published while it is down is lost, and its waiters wait out their timeouts.
 */
export class RedisKeyStore implements KeyStore {
  readonly kind = "redis" as const;
  readonly keys: KeySpace;

  constructor(
    private readonly redis: Redis | Cluster,
    options: RedisKeyStoreOptions = {},
  ) {
    this.keys = new KeySpace(options.prefix);
    defineScripts(redis);
  }

  private epochsMarked: Promise<unknown> | null = null;
  /** set once every bucket has its epoch: begin then skips the wait */
  private epochsReady = false;
  private readonly waiters = new ChangeWaiters((channel) => this.watch(channel));
  /** the connection waiters listen on; null until the first wait */
  private subscriberClient: Redis | Cluster | null = null;

  /**
   * Every bucket gets its epoch when the store is first used, not when the bucket is first
   * written: a fresh store then has one epoch before any record, and nothing to recover. A bucket
   * that loses its data later gets a new epoch from the begin script.
   */
  private markEpochs(nowMs: number): Promise<unknown> {
    this.epochsMarked ??= Promise.all(BUCKETS.map((b) => this.redis.set(this.keys.epoch(b), String(nowMs), "NX"))).then(
      () => {
        this.epochsReady = true;
      },
      (err) => {
        this.epochsMarked = null;
        throw err;
      },
    );
    return this.epochsMarked;
  }

  async begin(input: BeginInput): Promise<BeginOutcome> {
    if (!this.epochsReady) await this.markEpochs(input.nowMs);
    const { scope, key } = input;
    const bucket = bucketOf(scope, key);
    const base = this.keys.base(bucket);
    const reply = await this.redis.idgBegin(
      this.keys.record(scope, key),
      `${base}token`,
      `${base}epoch`,
      base,
      scope,
      key,
      escapeField(input.tool),
      escapeField(input.fingerprint),
      String(input.nowMs),
      String(input.nowMs + input.leaseMs),
      (input.fallback ? "1" : "0") + (input.takeoverStuck ? "1" : "0") + (input.retryUnknown ? "1" : "0"),
      optionalArg(input.session),
      escapeField(input.executionId),
      String(bucket),
    );
    const [outcome, token, value, takenOver, epochMs] = reply;
    const record = decodeRecord(scope, key, value);
    if (record === null) throw new UnexpectedRedisReplyError("begin", reply);
    switch (outcome) {
      case "reserved":
        return { kind: "reserved", token: Number(token), record, takenOver: decodeRecord(scope, key, takenOver), storeEpochMs: Number(epochMs) };
      case "replay":
      case "conflict":
      case "stuck":
      case "unknown":
      case "mismatch":
        return { kind: outcome, record };
      default:
        throw new UnexpectedRedisReplyError("begin", reply);
    }
  }

  /** One GET, and the rules' test of a replay (which the begin script's first lines make too). */
  async peekReplay(scope: string, key: string, fingerprint: string, nowMs: number): Promise<KeyRecord | null> {
    const value = await this.redis.get(this.keys.record(scope, key));
    let record: KeyRecord | null;
    try {
      record = decodeRecord(scope, key, value);
    } catch {
      return null; // a record begin refuses (an earlier encoding): begin answers it
    }
    return isReplay(record, fingerprint, nowMs) ? record : null;
  }

  async complete(
    scope: string,
    key: string,
    token: number,
    result: StoredResult,
    ttlMs: number,
    nowMs: number,
    options: CompleteOptions = {},
  ): Promise<CompleteOutcome> {
    const reply = await this.redis.idgComplete(
      ...this.heldArgs(scope, key, token),
      String(nowMs),
      String(nowMs + ttlMs),
      ...resultArgs(result),
      executionArg(options),
    );
    return completeOutcome("complete", scope, key, reply);
  }

  /** KEYS[1] and ARGV[1..4] of every holder's change (scripts/includes/held.lua) */
  private heldArgs(scope: string, key: string, token: number): [recordKey: string, base: string, scope: string, key: string, token: string] {
    return [this.keys.record(scope, key), this.keys.base(bucketOf(scope, key)), scope, key, String(token)];
  }

  async abandon(scope: string, key: string, token: number): Promise<boolean> {
    const deleted = await this.redis.idgAbandon(...this.heldArgs(scope, key, token));
    return Number(deleted) === 1;
  }

  async markUnknown(scope: string, key: string, token: number, note: string, nowMs: number, options: CompleteOptions = {}): Promise<CompleteOutcome> {
    const reply = await this.redis.idgMarkUnknown(...this.heldArgs(scope, key, token), String(nowMs), optionalArg(note), executionArg(options));
    return completeOutcome("markUnknown", scope, key, reply);
  }

  async extendLease(scope: string, key: string, token: number, leaseUntilMs: number): Promise<CompleteOutcome> {
    const reply = await this.redis.idgExtendLease(...this.heldArgs(scope, key, token), String(leaseUntilMs));
    return completeOutcome("extendLease", scope, key, reply);
  }

  async release(scope: string, key: string, guard: OperatorGuard): Promise<OperatorOutcome> {
    const reply = await this.redis.idgRelease(
      this.keys.record(scope, key),
      this.keys.base(bucketOf(scope, key)),
      scope,
      key,
      String(guard.nowMs),
      guard.force ? "1" : "0",
      guard.token === undefined ? "" : String(guard.token),
    );
    const [outcome, beforeValue] = reply;
    const before = decodeRecord(scope, key, beforeValue);
    if (outcome === "ok" && before !== null) return { ok: true, before, after: null };
    if (isOperatorRefusal(outcome)) return { ok: false, reason: outcome, current: before };
    throw new UnexpectedRedisReplyError("release", reply);
  }

  async resolve(scope: string, key: string, result: StoredResult, ttlMs: number, guard: OperatorGuard): Promise<OperatorOutcome> {
    const reply = await this.redis.idgResolve(
      this.keys.record(scope, key),
      this.keys.base(bucketOf(scope, key)),
      scope,
      key,
      String(guard.nowMs),
      String(guard.nowMs + ttlMs),
      ...resultArgs(result),
      guard.force ? "1" : "0",
      guard.token === undefined ? "" : String(guard.token),
    );
    const [outcome, beforeValue, afterValue] = reply;
    const before = decodeRecord(scope, key, beforeValue);
    const after = decodeRecord(scope, key, afterValue);
    if (outcome === "ok" && before !== null && after !== null) return { ok: true, before, after };
    if (isOperatorRefusal(outcome)) return { ok: false, reason: outcome, current: before };
    throw new UnexpectedRedisReplyError("resolve", reply);
  }

  async get(scope: string, key: string): Promise<KeyRecord | null> {
    return decodeRecord(scope, key, await this.redis.get(this.keys.record(scope, key)));
  }

  async epochOf(scope: string, key: string): Promise<number | null> {
    const epoch = await this.redis.get(this.keys.epoch(bucketOf(scope, key)));
    return epoch === null ? null : Number(epoch);
  }

  /**
   * Newest first. With a state filter the order is by that state's deadline, latest first
   * (inflight and stuck: leaseUntilMs; unknown: unknownAtMs; done and expired: expiresAtMs),
   * because the state indexes are scored by deadline; otherwise by createdAtMs. Ties are broken by
   * scope and key, descending (in a scope's own listing by the key; an entry an earlier version
   * wrote there as `scope \n key` sorts as that string until `rebuild-indexes`), so the cursor is
   * exact. A filter the chosen index does not cover (prefix, tool) is applied while reading within
   * a budget per bucket, so such a page may be short yet have a nextCursor.
   *
   * A list across scopes reads, in each bucket, the own indexes of every scope the bucket lists
   * (its `scopes` set), merged by the page script into the order of one index shared by them:
   * its positions are `scope \n key`. Unknown keys of one tool are read from the tool's index,
   * which holds every scope.
   */
  async list(query: ListQuery): Promise<ListPage> {
    if (!Number.isFinite(query.limit)) throw new RangeError(`list limit must be a number, got ${query.limit}`);
    const limit = Math.max(1, Math.min(MAX_LIMIT, Math.floor(query.limit)));
    const cursor = decodeCursor(query.cursor);
    const budget = limit * READ_BUDGET_FACTOR;
    const scope = query.scope ?? "";
    const across = scope === "" && !(query.state === "unknown" && query.tool !== undefined);
    if (across && cursor !== null && !cursor.member.includes(MEMBER_SEPARATOR)) throw new InvalidCursorError();
    const plan = this.planList(query, across ? null : scope);
    const pages = await Promise.all(BUCKETS.map((bucket) => this.readBucket(plan, bucket, cursor, limit + 1, budget)));
    const { entries, next } = mergeBucketPages(pages, limit);

    const rows = await this.readListRows(entries.map((entry) => entry.member), scope === "" ? null : scope);
    const seen = new Set<string>();
    const items = rows.filter((row): row is KeyRecord => {
      // a record may change between the index read and the row read: drop what no longer matches
      if (row === null || (query.state !== undefined && stateOf(row, query.nowMs) !== query.state)) return false;
      // a scope's list holds that scope's records, whatever an index held
      if (scope !== "" && row.scope !== scope) return false;
      // once: processes of two versions at once can leave an entry of each member form (docs/operate.md)
      const id = memberOf(row.scope, row.key);
      if (seen.has(id)) return false;
      seen.add(id);
      return true;
    });
    return { items, nextCursor: next === null ? null : encodeCursor(next) };
  }

  /**
   * Which index a list reads. A state filter reads that stored status' index (deadline order), or
   * for unknown keys of one tool that tool's unknown index; without a state, the time index, or
   * the lex index for a key prefix. Scope and key prefix are matched on the index member, any
   * other tool filter on the record (only unknown records have a per-tool index), while reading
   * within the budget.
   *
   * `scope` is the scope whose own indexes are read (a tenant's list), so that what it examines,
   * where its budget stops and whether it answers an empty page with a cursor depend on that
   * scope's records only: through an index shared by scopes, another tenant's many matching keys
   * would show as short or empty pages with a cursor. null reads the same indexes of every scope
   * (page-across-1.lua); "" the unknown-by-tool index (unknown keys of one tool across scopes).
   */
  private planList(query: ListQuery, scope: string | null): Plan {
    const { state } = query;
    const prefix = query.prefix ?? "";
    const tool = query.tool === undefined ? "" : escapeField(query.tool);
    /** one index per bucket, or across scopes the same index of every scope ("created", "st:<status>", "lx") */
    const source = (index: (b: number) => string, across: string): Source => (scope === null ? { across } : { index, scope });
    if (state !== undefined) {
      const { status, range } = STATE_RANGES[state];
      const [max, min] = scoreBounds(range, query.nowMs);
      const byTool = scope === "";
      return {
        mode: "score",
        source: byTool
          ? { index: (b) => this.keys.byUnknownTool(b, query.tool!), scope: "" }
          : source((b) => this.keys.scopeStatus(b, scope!, status), `st:${status}`),
        max: max === "+inf" ? Infinity : Number(max),
        maxInclusive: true,
        min,
        prefix,
        tool: byTool ? "" : tool,
      };
    }
    const timePlan: Extract<Plan, { mode: "score" }> = {
      mode: "score",
      source: source((b) => this.keys.scopeCreated(b, scope!), "created"),
      max: Infinity, maxInclusive: true, min: "-inf", prefix, tool,
    };
    // a prefix is usually selective: the lex index answers it unless a bucket has too many matches
    const lex = source((b) => this.keys.scopeLex(b, scope!), "lx");
    return prefix !== "" ? { mode: "lex", source: lex, prefix, tool, fallback: timePlan } : timePlan;
  }

  private async readBucket(plan: Plan, bucket: number, cursor: Position | null, want: number, budget: number): Promise<BucketPage> {
    // page-1.lua reads one index, page-across-1.lua the same index of each of the bucket's scopes
    const page = (mode: "score" | "lex", max: string, min: string, skipScore: string, skipMember: string) =>
      "across" in plan.source
        ? this.redis.idgPageAcross(
            this.keys.scopes(bucket),
            mode, plan.source.across, max, min, skipScore, skipMember,
            String(want), String(budget), plan.prefix, plan.tool, this.keys.base(bucket),
          )
        : this.redis.idgPage(
            plan.source.index(bucket),
            mode, max, min, skipScore, skipMember,
            String(want), String(budget), plan.source.scope, plan.prefix, plan.tool, this.keys.base(bucket),
          );
    if (plan.mode === "lex") {
      const reply = await page("lex", "", "", cursor === null ? "" : String(cursor.score), cursor?.member ?? "");
      if (Number(reply[0]) === -1) return this.readBucket(plan.fallback, bucket, cursor, want, budget);
      return parsePage(reply);
    }
    let max = plan.max === Infinity ? "+inf" : String(plan.max);
    let skipScore = "";
    let skipMember = "";
    if (cursor !== null && (cursor.score < plan.max || (cursor.score === plan.max && plan.maxInclusive))) {
      max = String(cursor.score);
      skipScore = max;
      skipMember = cursor.member;
    }
    return parsePage(await page("score", max, plan.min, skipScore, skipMember));
  }

  /**
   * The records of index members (of `scope`'s own indexes, or of the shared ones when null),
   * without their results: one MGET per bucket (one slot each).
   */
  private async readListRows(members: string[], scope: string | null): Promise<(KeyRecord | null)[]> {
    const named = members.map((member) => {
      const entry = entryOfMember(member, scope);
      return { ...entry, bucket: bucketOf(entry.scope, entry.key) };
    });
    const byBucket = new Map<number, number[]>();
    named.forEach((n, i) => {
      const at = byBucket.get(n.bucket);
      if (at) at.push(i);
      else byBucket.set(n.bucket, [i]);
    });
    const rows = new Array<KeyRecord | null>(members.length).fill(null);
    await Promise.all(
      [...byBucket.values()].map(async (indexes) => {
        const values = await this.redis.mget(...indexes.map((i) => this.keys.record(named[i].scope, named[i].key)));
        indexes.forEach((i, j) => {
          rows[i] = decodeRecord(named[i].scope, named[i].key, values[j], false);
        });
      }),
    );
    return rows;
  }

  /**
   * Per bucket and stored status: one scope's, a ZCOUNT of that scope's status index; unknown keys
   * by tool, a ZCOUNT of the tool's unknown index; otherwise the count script, over every scope the
   * bucket lists (a ZCOUNT each, or by tool reading each record: filtered counts serve the API,
   * not a console page). Scope and tool together are not offered.
   */
  async counts(nowMs: number, filter: { tool?: string; scope?: string } = {}): Promise<StateCounts> {
    const { tool, scope } = filter;
    if (tool !== undefined && scope !== undefined) {
      throw new UnsupportedFilterError("counts by tool and scope together");
    }
    const counts = Object.fromEntries(KEY_STATES.map((state) => [state, 0])) as StateCounts;
    const split: Record<StoredStatus, [future: KeyState, past: KeyState]> = {
      inflight: ["inflight", "stuck"],
      unknown: ["unknown", "unknown"],
      done: ["done", "expired"],
    };
    await Promise.all(
      BUCKETS.flatMap((bucket) =>
        STORED_STATUSES.map(async (status) => {
          const [futureState, pastState] = split[status];
          let future: number;
          let past: number;
          if (scope !== undefined || (tool !== undefined && status === "unknown")) {
            const index = scope !== undefined ? this.keys.scopeStatus(bucket, scope, status) : this.keys.byUnknownTool(bucket, tool!);
            [future, past] = await Promise.all([this.redis.zcount(index, `(${nowMs}`, "+inf"), this.redis.zcount(index, "-inf", String(nowMs))]);
          } else {
            const reply = await this.redis.idgCount(
              this.keys.scopes(bucket),
              this.keys.base(bucket),
              String(nowMs),
              status,
              tool === undefined ? "" : escapeField(tool),
            );
            [future, past] = [Number(reply[0]), Number(reply[1])];
          }
          // after the awaits: `counts[state] += await …` would add to a value read before it
          counts[futureState] += future;
          counts[pastState] += past;
        }),
      ),
    );
    return counts;
  }

  readonly resultBytes: ResultBytesCounter = {
    add: async (additions) => {
      if (additions.length === 0) return;
      // one write: every key here shares the hash tag {<prefix>:rb}, so a cluster takes it as one pipeline too
      const pipeline = this.redis.pipeline();
      for (const a of additions) pipeline.hincrby(this.keys.resultBytes(a.scope), String(expiryBucket(a.expiresAtMs)), a.bytes);
      pipeline.sadd(this.keys.resultBytesScopes(), ...new Set(additions.map((a) => a.scope)));
      const replies = (await pipeline.exec()) ?? [];
      const failed = replies.find(([err]) => err !== null);
      if (failed) throw failed[0];
    },
    usage: async (scope, nowMs) => this.scopeResultBytes(scope, nowMs),
    all: async (nowMs) => {
      const scopes = await this.redis.smembers(this.keys.resultBytesScopes());
      const out = new Map<string, number>();
      for (const scope of scopes) {
        const bytes = await this.scopeResultBytes(scope, nowMs);
        if (bytes > 0) out.set(scope, bytes);
        else await this.redis.srem(this.keys.resultBytesScopes(), scope);
      }
      return out;
    },
  };

  /** Sums the hours still to come, and drops those past. */
  private async scopeResultBytes(scope: string, nowMs: number): Promise<number> {
    const key = this.keys.resultBytes(scope);
    const hours = await this.redis.hgetall(key);
    const now = currentBucket(nowMs);
    let total = 0;
    const past: string[] = [];
    for (const [hour, bytes] of Object.entries(hours)) {
      if (Number(hour) >= now) total += Number(bytes);
      else past.push(hour);
    }
    if (past.length > 0) await this.redis.hdel(key, ...past);
    return total;
  }

  /** Each bucket's scopes in turn (the buckets in parallel), batch by batch. */
  async purge(olderThanMs: number, batch: number = DEFAULT_PURGE_BATCH): Promise<number> {
    const size = Math.max(1, Math.floor(batch));
    const perBucket = await Promise.all(
      BUCKETS.map(async (bucket) => {
        let total = 0;
        for (const scope of await this.redis.zrange(this.keys.scopes(bucket), "0", "-1")) {
          const index = this.keys.scopeStatus(bucket, scope, "done");
          for (;;) {
            const removed = Number(await this.redis.idgPurge(index, this.keys.base(bucket), String(olderThanMs), String(size), scope));
            total += removed;
            if (removed < size) break;
          }
        }
        return total;
      }),
    );
    return perBucket.reduce((a, b) => a + b, 0);
  }

  async waitForChange(scope: string, key: string, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    const recordKey = this.keys.record(scope, key);
    return this.waiters.wait(this.keys.changeChannel(scope, key), timeoutMs, signal, async () => {
      // the status letter sits at a fixed place in the value
      return statusOfValue(await this.redis.getrange(recordKey, 0, 2)) === "inflight";
    });
  }

  /** Channels subscribed for waiters now (for tests and status). */
  get watchedChannels(): number {
    return this.waiters.watching;
  }

  private watch(channel: string): Watch {
    const subscriber = this.subscriber();
    return {
      ready: subscriber.subscribe(channel).then(() => {}),
      stop: () => {
        subscriber.unsubscribe(channel).catch(() => {}); // a closed connection has no subscriptions left
      },
    };
  }

  private subscriber(): Redis | Cluster {
    if (this.subscriberClient) return this.subscriberClient;
    let subscriber: Redis | Cluster;
    if (this.redis instanceof Cluster) {
      // The Cluster client already sends (UN)SUBSCRIBE over a connection of their own to one node,
      // opened on the first one, and moves them to another node when that one goes away.
      subscriber = this.redis;
    } else {
      // Commands wait for the connection instead of failing (a SUBSCRIBE sent while Redis is away
      // applies when it is back); the store's own connection fails fast instead.
      subscriber = this.redis.duplicate({
        enableOfflineQueue: true,
        maxRetriesPerRequest: null,
        autoResubscribe: true,
        // CLIENT LIST shows what the connection is for
        connectionName: `idemgate:${this.keys.prefix}:changes`.replace(/[^\w:.-]/g, "_"),
      });
      subscriber.on("error", () => {}); // the store's connection reports Redis being away
    }
    subscriber.on("message", (channel: string) => this.waiters.notify(channel));
    this.subscriberClient = subscriber;
    return subscriber;
  }

  /**
   * `idemgate store rebuild-indexes`: drops every index key of the store and lists each record
   * again in the indexes it belongs in, rewriting records kept in the hash encoding of earlier
   * versions in the current one (the scripts refuse those). Two passes of SCAN over every master:
   * the first unlinks index keys, the second rebuilds record by record (one script call each,
   * atomic per record). Run it with the gateways stopped: until it is done, lists miss records and
   * calls on a record in the old encoding fail. Running it again changes nothing.
   */
  async rebuildIndexes(): Promise<{ records: number; rewritten: number; droppedIndexes: number }> {
    const nodes: Redis[] = this.redis instanceof Cluster ? this.redis.nodes("master") : [this.redis];
    const pattern = `{${this.keys.prefix.replace(/[*?[\]\\]/g, "\\$&")}:*`;
    const named = (redisKey: string) => {
      const close = redisKey.indexOf("}:");
      const bucket = Number(redisKey.slice(this.keys.prefix.length + 2, close));
      return { bucket, base: redisKey.slice(0, close + 2), rest: redisKey.slice(close + 2) };
    };
    const scanAll = async (each: (keys: string[]) => Promise<void>) => {
      for (const node of nodes) {
        let cursor = "0";
        do {
          const [next, keys] = await node.scan(cursor, "MATCH", pattern, "COUNT", 1_000);
          cursor = next;
          await each(keys.filter((k) => named(k).base === this.keys.base(named(k).bucket)));
        } while (cursor !== "0");
      }
    };
    let droppedIndexes = 0;
    await scanAll(async (keys) => {
      const indexes = keys.filter((k) => {
        const { rest } = named(k);
        return !rest.startsWith("r:") && rest !== "token" && rest !== "epoch";
      });
      // one UNLINK per key: on a cluster a multi-key command must stay within one slot
      await Promise.all(indexes.map((k) => this.redis.unlink(k)));
      droppedIndexes += indexes.length;
    });
    let records = 0;
    let rewritten = 0;
    await scanAll(async (keys) => {
      const outcomes = await Promise.all(
        keys
          .filter((k) => named(k).rest.startsWith("r:"))
          .map((k) => {
            const { base, rest } = named(k);
            // scopes hold no ":" (SCOPE_PATTERN); the key is everything after the first one
            const at = rest.indexOf(":", 2);
            return this.redis.idgRebuild(k, base, rest.slice(2, at), rest.slice(at + 1));
          }),
      );
      for (const o of outcomes) {
        if (Number(o) >= 0) records++;
        if (Number(o) === 1) rewritten++;
      }
    });
    return { records, rewritten, droppedIndexes };
  }

  /** Resolves once connected, or after `timeoutMs` (the caller then serves 503s until Redis is back). */
  async waitUntilReady(timeoutMs: number): Promise<boolean> {
    if (this.redis.status === "ready") return true;
    return new Promise((resolve) => {
      const done = (ok: boolean) => {
        clearTimeout(timer);
        this.redis.off("ready", onReady);
        resolve(ok);
      };
      const onReady = () => done(true);
      const timer = setTimeout(() => done(false), timeoutMs);
      this.redis.once("ready", onReady);
    });
  }

  async ping(): Promise<void> {
    await this.redis.ping();
  }

  async close(): Promise<void> {
    this.waiters.close();
    const subscriber = this.subscriberClient;
    this.subscriberClient = null;
    if (subscriber && subscriber !== this.redis) subscriber.disconnect();
    // quit waits for replies under way; a connection that is already down just disconnects
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}

const executionArg = (options: CompleteOptions) => (options.executionId === undefined ? "" : escapeField(options.executionId));

function completeOutcome(what: string, scope: string, key: string, reply: CompleteReply): CompleteOutcome {
  const [outcome, value] = reply;
  const record = decodeRecord(scope, key, value);
  if (outcome === "ok" && record !== null) return { ok: true, record };
  if (outcome === "stale_token" || outcome === "absent") return { ok: false, reason: outcome, current: record };
  throw new UnexpectedRedisReplyError(what, reply);
}

function isOperatorRefusal(outcome: string): outcome is OperatorRefusal {
  return outcome === "absent" || outcome === "not_inflight" || outcome === "running" || outcome === "changed";
}

function parsePage(reply: PageReply): BucketPage {
  const done = Number(reply[0]) === 1;
  const entries: Position[] = [];
  for (let i = 3; i + 1 < reply.length; i += 2) {
    entries.push({ member: String(reply[i]), score: Number(reply[i + 1]) });
  }
  const stop = done ? null : { score: Number(reply[1]), member: String(reply[2]) };
  return { entries, done, stop };
}

/** Opens a Redis connection for the store; commands fail fast instead of queueing while Redis is down. */
export function createRedisKeyStore(url: string, options: RedisKeyStoreOptions & { redis?: RedisOptions } = {}): RedisKeyStore {
  // No offline queue: while Redis is down a call fails at once (503, nothing runs) instead of
  // waiting for a reconnect; openRuntime waits for the first connection (waitUntilReady).
  // No auto-pipelining: it holds each command until setImmediate to batch it with others, which
  // measured slower here both one call at a time (313 vs 423 µs per first execution) and with 50
  // concurrent callers (9,300 vs 7,300 first executions/s). Commands sent in the same turn of the
  // event loop leave in one write all the same (coalesceWrites), without waiting for the next turn.
  const redis = new Redis(url, { maxRetriesPerRequest: 1, enableOfflineQueue: false, ...options.redis });
  coalesceWrites(redis);
  logConnectionState(redis, "Redis");
  return new RedisKeyStore(redis, { prefix: options.prefix });
}

/**
 * Opens a Redis Cluster client for the store from seed nodes (any masters or replicas; the client
 * discovers the others and the slot map). Scripts go to the master of their bucket's slot
 * (`scaleReads: "master"`), as EVALSHA; each node connection loads a script on first use and
 * ioredis resends it on NOSCRIPT (a failover, a SCRIPT FLUSH), and follows MOVED and ASK.
 */
export function createRedisClusterKeyStore(
  nodes: ClusterNode[],
  options: RedisKeyStoreOptions & { cluster?: ClusterOptions } = {},
): RedisKeyStore {
  if (nodes.length === 0) throw new Error("createRedisClusterKeyStore needs at least one seed node");
  // no auto-pipelining, for the reason given at createRedisKeyStore
  const cluster = new Cluster(nodes, {
    scaleReads: "master",
    ...options.cluster,
    redisOptions: { maxRetriesPerRequest: 1, ...options.cluster?.redisOptions },
  });
  // each node's connection writes a turn's commands at once, as a single Redis's does
  cluster.on("+node", (node: Redis) => coalesceWrites(node));
  logConnectionState(cluster, "Redis Cluster");
  return new RedisKeyStore(cluster, { prefix: options.prefix });
}

function logConnectionState(client: Redis | Cluster, what: string): void {
  // Without a listener ioredis reports every failed reconnect as an unhandled error. Calls fail
  // with their own error (503 at the gateway); the log says once that the connection is down.
  let down = false;
  client.on("error", (err: Error) => {
    if (!down) console.error(`idemgate: ${what} connection error (${err.message}); retrying in the background`);
    down = true;
  });
  client.on("ready", () => {
    if (down) console.error(`idemgate: ${what} connection is back`);
    down = false;
  });
}
