import { InvalidCursorError } from "@/lib/idempotency/errors";

/**
 * A position in a list: index score and member as the index holds it ("scope \n key"; the key
 * alone in a scope's own index, or "scope \n key" there too for an entry of an earlier version).
 * While one version writes (docs/operate.md: processes of two versions at once are not supported)
 * an entry keeps its form in its index for its life, so a position read from it stays a valid
 * place to continue from.
 */
export interface Position {
  score: number;
  member: string;
}

/**
 * Lists are ordered by score descending, then member descending (the order ZREVRANGEBYSCORE
 * gives equal scores). Negative when `a` comes first. Members are ASCII, so UTF-16 comparison
 * equals Redis' byte comparison.
 */
export function comparePositions(a: Position, b: Position): number {
  if (a.score !== b.score) return a.score > b.score ? -1 : 1;
  if (a.member === b.member) return 0;
  return a.member > b.member ? -1 : 1;
}

export function encodeCursor(position: Position): string {
  return Buffer.from(JSON.stringify({ s: position.score, m: position.member }), "utf8").toString("base64url");
}

export function decodeCursor(cursor: string | null | undefined): Position | null {
  if (cursor === null || cursor === undefined || cursor === "") return null;
  try {
    const parsed: unknown = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
    if (typeof parsed === "object" && parsed !== null) {
      const { s, m } = parsed as { s?: unknown; m?: unknown };
      if (typeof s === "number" && Number.isFinite(s) && typeof m === "string") return { score: s, member: m };
    }
  } catch {
    // fall through
  }
  throw new InvalidCursorError();
}

/** One bucket's answer: its matches in list order, and how far it read. */
export interface BucketPage {
  entries: Position[];
  /** nothing more in range after `entries` */
  done: boolean;
  /** when not done: every entry up to and including this one has been examined */
  stop: Position | null;
}

/**
 * K-way merge of the buckets' pages. Only entries up to the earliest stop of an unfinished bucket
 * are certain to be complete, so the page ends there at the latest; the cursor then points at that
 * stop, and the next page continues after it (a filtered page may hold fewer than `limit` rows).
 */
export function mergeBucketPages(pages: readonly BucketPage[], limit: number): { entries: Position[]; next: Position | null } {
  let frontier: Position | null = null;
  for (const page of pages) {
    if (page.done || page.stop === null) continue;
    if (frontier === null || comparePositions(page.stop, frontier) < 0) frontier = page.stop;
  }
  const heads = pages.map(() => 0);
  const merged: Position[] = [];
  // limit + 1 tells whether the page is followed by more certain entries
  while (merged.length <= limit) {
    let best = -1;
    for (let b = 0; b < pages.length; b++) {
      const entry = pages[b].entries[heads[b]];
      if (entry === undefined) continue;
      if (best === -1 || comparePositions(entry, pages[best].entries[heads[best]]) < 0) best = b;
    }
    if (best === -1) break;
    const entry = pages[best].entries[heads[best]];
    if (frontier !== null && comparePositions(entry, frontier) > 0) break;
    merged.push(entry);
    heads[best]++;
  }
  if (merged.length > limit) {
    const entries = merged.slice(0, limit);
    return { entries, next: entries[entries.length - 1] };
  }
  return { entries: merged, next: frontier };
}
