import type { StoredStatus } from "@/lib/idempotency/record";

/**
 * The one place Redis key names are built. The Lua include `scripts/includes/keys.lua` mirrors
 * the index layout below (scripts derive a record's index keys from its fields, which the caller
 * cannot know before the script reads the record); change both together.
 *
 * Every key starts with its bucket's hash tag `{<prefix>:<bucket>}` so that a record and all its
 * index entries live in one cluster slot and each script call stays on one node.
 */
export const BUCKET_COUNT = 16;

export const DEFAULT_PREFIX = "idg";

/** Separates the parts of index members (scope, key, createdAtMs); scopes and keys never contain it. */
export const MEMBER_SEPARATOR = "\n";

export class KeySpace {
  constructor(readonly prefix: string = DEFAULT_PREFIX) {
    if (prefix.length === 0 || /[{}]/.test(prefix)) {
      throw new Error(`invalid Redis key prefix ${JSON.stringify(prefix)}: must be non-empty without braces`);
    }
  }

  /** The bucket's hash tag and separator; scripts derive the bucket's index keys from it. */
  base(bucket: number): string {
    return `{${this.prefix}:${bucket}}:`;
  }

  /**
   * A scope's stored result bytes by the hour their records expire (field: the hour's number, see
   * lib/idempotency/scope-result-limit.ts): one small hash per scope, under a hash tag of their own
   * (each is read and written on its own, never with a record).
   */
  resultBytes(scope: string): string {
    return `{${this.prefix}:rb}:s:${scope}`;
  }

  /** The scopes that have a resultBytes hash: the metric reads each. */
  resultBytesScopes(): string {
    return `{${this.prefix}:rb}:scopes`;
  }

  record(scope: string, key: string): string {
    return `${this.base(bucketOf(scope, key))}r:${scope}:${key}`;
  }

  token(bucket: number): string {
    return `${this.base(bucket)}token`;
  }

  /** since when (epoch ms) the bucket holds data; missing after a flush or a restart without persistence */
  epoch(bucket: number): string {
    return `${this.base(bucket)}epoch`;
  }

  /**
   * The scopes that have records in the bucket, a sorted set scored by the newest createdAtMs each
   * has had there (never lowered: an upper bound of its created index): lists across scopes merge
   * their own indexes (scopeStatus, scopeCreated, scopeLex; page-across-1.lua), and by creation
   * time read a scope only once the merge reaches its score; counts across scopes add theirs up,
   * and purge walks them. A scope is added with its first record in the bucket and removed with
   * its last (includes/record.lua).
   */
  scopes(bucket: number): string {
    return `${this.base(bucket)}scopes`;
  }

  /**
   * Unknown records only, by tool, scored by unknownAtMs, members `scope \n key` (memberOf): they
   * stay until someone decides, so they can pile up (an outage), and operators and probes list
   * them by tool across scopes. Every other tool filter is applied while reading a status or time
   * index: inflight records (running and stuck) are few, and a first execution then touches no
   * per-tool index.
   */
  byUnknownTool(bucket: number, tool: string): string {
    return `${this.base(bucket)}stt:unknown:${escapeField(tool)}`;
  }

  /**
   * A record's other indexes are its scope's own: by stored status, scored by the status' deadline
   * (inflight: leaseUntilMs, unknown: unknownAtMs, done: expiresAtMs), for lists by state, counts
   * and purge; by createdAtMs; and for key-prefix search with ZRANGEBYLEX (score 0). Members leave
   * the scope out, since it is in the index's name: `key` in the status and created indexes
   * (scopeMemberOf), `key \n createdAtMs` in the lex index (scopeLexMemberOf). Earlier versions
   * wrote the form `scope \n key` (`key \n scope \n createdAtMs`) here too: readers take both
   * (entryOfMember), removals remove both, and `idemgate store rebuild-indexes` rewrites every
   * entry in the current form. A list position is the member as its index holds it (cursor.ts).
   *
   * A tenant's listing reads these, so how far it reads and what it answers depend on that scope's
   * records alone. A list across scopes (an operator's) merges the indexes of the scopes the bucket
   * lists (`scopes`). Earlier versions also kept a copy of the three indexes shared by the
   * bucket's scopes, for such lists: three more sorted-set entries per record, about 376 B of Redis
   * memory in skiplist encoding (docs/benchmarks.md, "Redis memory per record"). Scopes hold no
   * ":" (SCOPE_PATTERN), so the names are unambiguous.
   */
  scopeStatus(bucket: number, scope: string, status: StoredStatus): string {
    return `${this.base(bucket)}s:${scope}:st:${status}`;
  }

  scopeCreated(bucket: number, scope: string): string {
    return `${this.base(bucket)}s:${scope}:created`;
  }

  scopeLex(bucket: number, scope: string): string {
    return `${this.base(bucket)}s:${scope}:lx`;
  }

  /**
   * The pub/sub channel on which the scripts announce every change of a record's state
   * (PUBLISH, message: the new stored status or "absent"): `{<prefix>:<bucket>}:chg:<scope>\n<key>`.
   * Nothing is stored under it. It is unique per store and record: the prefix has no braces, so the
   * hash tag ends it, and scopes and keys never contain "\n"; waiters SUBSCRIBE to exact names, so
   * glob characters in a key mean nothing. Named in its bucket's hash slot, so sharded pub/sub
   * (SPUBLISH from the scripts) would be possible without renaming. The Lua include keys.lua
   * builds the same name (changeChannelOf).
   */
  changeChannel(scope: string, key: string): string {
    return `${this.base(bucketOf(scope, key))}chg:${memberOf(scope, key)}`;
  }

  /** Every index key a record with these fields is listed under (for tests and tooling). */
  indexesOf(scope: string, key: string, tool: string, status: StoredStatus): string[] {
    return this.entriesOf({ scope, key, tool, status, createdAtMs: 0, deadlineMs: 0 }).map(([index]) => index);
  }

  /**
   * Every index entry of a record, as the scripts write them (includes/record.lua, addToIndexes):
   * [index key, score, member]. `deadlineMs` is the status' deadline (inflight: leaseUntilMs,
   * unknown: unknownAtMs, done: expiresAtMs).
   */
  entriesOf(r: { scope: string; key: string; tool: string; status: StoredStatus; createdAtMs: number; deadlineMs: number }): [index: string, score: number, member: string][] {
    const { scope, key, createdAtMs, deadlineMs } = r;
    const b = bucketOf(scope, key);
    return [
      [this.scopeStatus(b, scope, r.status), deadlineMs, scopeMemberOf(key)],
      ...(r.status === "unknown" ? [[this.byUnknownTool(b, r.tool), deadlineMs, memberOf(scope, key)] as [string, number, string]] : []),
      [this.scopeCreated(b, scope), createdAtMs, scopeMemberOf(key)],
      [this.scopeLex(b, scope), 0, scopeLexMemberOf(key, createdAtMs)],
    ];
  }

  /** A SCAN MATCH pattern for every key of the bucket (records, indexes, token, epoch). */
  bucketPattern(bucket: number): string {
    return `${this.base(bucket).replace(/[*?[\]\\]/g, "\\$&")}*`;
  }
}

/**
 * How free-form fields go into a record value and a key name: "%" and "\n" (the value's field
 * separator) are percent-encoded; everything else is kept. Tool names, fingerprints and execution
 * ids never contain either, so for them this is the identity.
 */
export function escapeField(value: string): string {
  return value.includes("%") || value.includes("\n") ? value.replace(/%/g, "%25").replace(/\n/g, "%0A") : value;
}

export function unescapeField(value: string): string {
  return value.includes("%") ? value.replace(/%0A/g, "\n").replace(/%25/g, "%") : value;
}

/**
 * `scope \n key`: a member of the bucket's unknown-by-tool indexes, and a list position across
 * scopes (cursor.ts).
 */
export function memberOf(scope: string, key: string): string {
  return `${scope}${MEMBER_SEPARATOR}${key}`;
}

/** A member of a scope's own status and created indexes: the key alone (the scope is in the index's name). */
export function scopeMemberOf(key: string): string {
  return key;
}

/** A member of a scope's own lex index: `key \n createdAtMs`. */
export function scopeLexMemberOf(key: string, createdAtMs: number): string {
  return `${key}${MEMBER_SEPARATOR}${createdAtMs}`;
}

/**
 * The scope and key of a member of a status, tool or created index, or of a list position:
 * `scope \n key` (an unknown-by-tool index, a position across scopes, or an entry an earlier
 * version wrote into a scope's own index), or the key alone in the own index of `scope` (null
 * where every member names its scope).
 */
export function entryOfMember(member: string, scope: string | null): { scope: string; key: string } {
  const at = member.indexOf(MEMBER_SEPARATOR);
  if (at !== -1) return { scope: member.slice(0, at), key: member.slice(at + 1) };
  if (scope === null) throw new Error(`index member ${JSON.stringify(member)} names no scope`);
  return { scope, key: member };
}

/** FNV-1a (32 bit) of the UTF-8 bytes of `scope \n key`, mod BUCKET_COUNT: stable across processes. */
export function bucketOf(scope: string, key: string): number {
  const member = memberOf(scope, key);
  let h = 0x811c9dc5;
  for (let i = 0; i < member.length; i++) {
    const c = member.charCodeAt(i);
    // keys and scopes are ASCII, one byte per character; anything else goes by its UTF-8 bytes
    if (c > 0x7f) return bucketOfBytes(member);
    h = Math.imul(h ^ c, 0x01000193) >>> 0;
  }
  return h % BUCKET_COUNT;
}

function bucketOfBytes(member: string): number {
  let h = 0x811c9dc5;
  for (const byte of Buffer.from(member, "utf8")) h = Math.imul(h ^ byte, 0x01000193) >>> 0;
  return h % BUCKET_COUNT;
}

export const BUCKETS: readonly number[] = Array.from({ length: BUCKET_COUNT }, (_, i) => i);

/** The hash tag Redis Cluster hashes for a key: the text between the first `{` and the next `}`. */
export function hashTagOf(redisKey: string): string {
  const open = redisKey.indexOf("{");
  if (open === -1) return redisKey;
  const close = redisKey.indexOf("}", open + 1);
  if (close === -1 || close === open + 1) return redisKey;
  return redisKey.slice(open + 1, close);
}
