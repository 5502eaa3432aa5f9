import { hash, randomBytes, randomUUID } from "node:crypto";
import type { PrismaClient } from "@/generated/prisma/client";
import { recordOperatorAction } from "@/lib/audit/operator-actions";
import { InvalidArgumentsError } from "@/lib/idempotency/errors";
import { isValidScope } from "@/lib/idempotency/key-rules";

export interface TokenPrincipal {
  tokenId: string;
  scope: string;
  /** keys sent with this token are advisory (minted by a model) unless a call says otherwise */
  advisoryKeys?: boolean;
}

const TOKEN_PREFIX = "idg_";

function hashToken(token: string): string {
  // API tokens carry 256 random bits: a fast hash is the right tool (unlike passwords).
  return hash("sha256", token, "hex");
}

export class InvalidScopeError extends InvalidArgumentsError {
  constructor(scope: string) {
    const message = `scope ${JSON.stringify(scope)} is invalid: use 1–64 letters, digits, '.', '_' or '-', starting with a letter or digit`;
    super(message, [{ path: "scope", message }]);
  }
}

/**
 * Creates a token for one scope, and its `token_create` row in the operator audit trail in the same
 * transaction, whoever asks (the console's API, the CLI, the first start's seed). The token is
 * returned once and only its hash is stored.
 */
export async function createApiToken(
  prisma: PrismaClient,
  input: { scope: string; label?: string | null; actor: string; advisoryKeys?: boolean },
): Promise<{ id: string; token: string; scope: string; prefix: string; advisoryKeys: boolean }> {
  if (!isValidScope(input.scope)) throw new InvalidScopeError(input.scope);
  const label = input.label?.trim() || null;
  const token = TOKEN_PREFIX + randomBytes(32).toString("base64url");
  const row = await prisma.$transaction(async (tx) => {
    const created = await tx.apiToken.create({
      data: {
        id: randomUUID(),
        scope: input.scope,
        label,
        prefix: token.slice(0, TOKEN_PREFIX.length + 6),
        hash: hashToken(token),
        advisoryKeys: input.advisoryKeys ?? false,
        createdAt: new Date(),
      },
    });
    await recordOperatorAction(tx, {
      actor: input.actor,
      action: "token_create",
      reason: label ?? "API token created",
      scope: created.scope,
      after: { tokenId: created.id, prefix: created.prefix, advisoryKeys: created.advisoryKeys },
    });
    return created;
  });
  clearTokenCache();
  return { id: row.id, token, scope: row.scope, prefix: row.prefix, advisoryKeys: row.advisoryKeys };
}

/**
 * Revokes an active token and records `token_revoke` with the actor and reason, in one transaction.
 * False (and nothing recorded) when there is no active token with this id.
 */
export async function revokeApiToken(prisma: PrismaClient, input: { id: string; actor: string; reason: string }): Promise<boolean> {
  const revoked = await prisma.$transaction(async (tx) => {
    const token = await tx.apiToken.findFirst({ where: { id: input.id, revokedAt: null }, select: { scope: true, prefix: true } });
    if (!token) return false;
    const out = await tx.apiToken.updateMany({ where: { id: input.id, revokedAt: null }, data: { revokedAt: new Date() } });
    if (out.count === 0) return false;
    await recordOperatorAction(tx, {
      actor: input.actor,
      action: "token_revoke",
      reason: input.reason,
      scope: token.scope,
      after: { tokenId: input.id, prefix: token.prefix },
    });
    return true;
  });
  clearTokenCache();
  return revoked;
}

export function listApiTokens(prisma: PrismaClient) {
  return prisma.apiToken.findMany({
    orderBy: { createdAt: "desc" },
    select: { id: true, scope: true, label: true, prefix: true, advisoryKeys: true, createdAt: true, revokedAt: true, lastUsedAt: true },
  });
}

// Looking a token up costs a database round trip on every call; a short cache keeps that off the
// hot path, keyed by the token's SHA-256 (the secret itself is not kept). A revocation or creation
// in this process clears it at once (and a lookup that was under way when it did is not cached);
// one made by another process (the CLI, another replica) takes effect within TOKEN_CACHE_MS.
// At most TOKEN_CACHE_ENTRIES known tokens, the oldest dropped first; unknown or revoked ones are
// remembered apart (at most UNKNOWN_TOKEN_CACHE_ENTRIES), so a caller sending made-up tokens evicts
// only other made-up tokens and never a real one (which would send each real call to the database).
// Kept on globalThis: the server loads
// this module more than once (the App Router's bundles and the gateway's fast path), and a
// revocation must reach them all.
export const TOKEN_CACHE_MS = 5_000;
export const TOKEN_CACHE_ENTRIES = 10_000;
export const UNKNOWN_TOKEN_CACHE_ENTRIES = 1_000;

interface TokenCache {
  entries: Map<string, { principal: TokenPrincipal; untilMs: number }>;
  /** tokens found unknown or revoked: digest → until when */
  unknown: Map<string, number>;
  /** bumped by every clear: a lookup started before it does not fill the cache */
  generation: number;
}
const holder = globalThis as unknown as { __idemgateTokenCache?: TokenCache };
const tokenCache: TokenCache = (holder.__idemgateTokenCache ??= { entries: new Map(), unknown: new Map(), generation: 0 });
// a cache made by an earlier version of this module (development reloads) lacks the second map
tokenCache.unknown ??= new Map();

function clearTokenCache(): void {
  tokenCache.entries.clear();
  tokenCache.unknown.clear();
  tokenCache.generation++;
}

function cachedAnswer(digest: string, nowMs: number): TokenPrincipal | null | undefined {
  const known = tokenCache.entries.get(digest);
  if (known && known.untilMs > nowMs) return known.principal;
  const unknownUntil = tokenCache.unknown.get(digest);
  return unknownUntil !== undefined && unknownUntil > nowMs ? null : undefined;
}

function remember(digest: string, principal: TokenPrincipal | null, nowMs: number): void {
  const { entries, unknown } = tokenCache;
  entries.delete(digest);
  unknown.delete(digest);
  const untilMs = nowMs + TOKEN_CACHE_MS;
  if (principal) {
    if (entries.size >= TOKEN_CACHE_ENTRIES) entries.delete(entries.keys().next().value!);
    entries.set(digest, { principal, untilMs });
  } else {
    if (unknown.size >= UNKNOWN_TOKEN_CACHE_ENTRIES) unknown.delete(unknown.keys().next().value!);
    unknown.set(digest, untilMs);
  }
}

/**
 * The cached answer for a bearer token, without I/O: its principal, null when it is unknown or
 * revoked, undefined when this process has not looked it up within TOKEN_CACHE_MS.
 */
export function cachedPrincipal(token: string, nowMs = Date.now()): TokenPrincipal | null | undefined {
  if (!token.startsWith(TOKEN_PREFIX) || token.length > 200) return null;
  return cachedAnswer(hashToken(token), nowMs);
}

/** The principal for a bearer token, or null for an unknown or revoked one. */
export async function authenticateToken(prisma: PrismaClient, token: string, nowMs = Date.now()): Promise<TokenPrincipal | null> {
  if (!token.startsWith(TOKEN_PREFIX) || token.length > 200) return null;
  const digest = hashToken(token);
  const cached = cachedAnswer(digest, nowMs);
  if (cached !== undefined) return cached;
  const generation = tokenCache.generation;
  const row = await prisma.apiToken.findUnique({ where: { hash: digest }, select: { id: true, scope: true, advisoryKeys: true, revokedAt: true } });
  const principal = row && !row.revokedAt ? { tokenId: row.id, scope: row.scope, advisoryKeys: row.advisoryKeys } : null;
  if (generation === tokenCache.generation) remember(digest, principal, nowMs);
  if (principal) {
    void prisma.apiToken.update({ where: { id: principal.tokenId }, data: { lastUsedAt: new Date() } }).catch(() => {});
  }
  return principal;
}
