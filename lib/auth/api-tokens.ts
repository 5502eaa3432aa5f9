import { createHash, randomBytes, randomUUID } from "node:crypto";
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
  return createHash("sha256").update(token).digest("hex");
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
  const token = TOKEN_PREFIX + randomBytes(32).toString("base64url");
  const row = await prisma.$transaction(async (tx) => {
    const created = await tx.apiToken.create({
      data: {
        id: randomUUID(),
        scope: input.scope,
        label: input.label ?? null,
        prefix: token.slice(0, TOKEN_PREFIX.length + 6),
        hash: hashToken(token),
        advisoryKeys: input.advisoryKeys ?? false,
        createdAt: new Date(),
      },
    });
    await recordOperatorAction(tx, {
      actor: input.actor,
      action: "token_create",
      reason: input.label ?? "API token created",
      scope: created.scope,
      after: { tokenId: created.id, prefix: created.prefix, advisoryKeys: created.advisoryKeys },
    });
    return created;
  });
  tokenCache.clear();
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
  tokenCache.clear();
  return revoked;
}

export function listApiTokens(prisma: PrismaClient) {
  return prisma.apiToken.findMany({
    orderBy: { createdAt: "desc" },
    select: { id: true, scope: true, label: true, prefix: true, advisoryKeys: true, createdAt: true, revokedAt: true, lastUsedAt: true },
  });
}

// Looking a token up costs a database round trip on every call; a short cache keeps that off the
// hot path. A revocation in this process clears it at once; one made by another process (the CLI)
// takes effect within TOKEN_CACHE_MS. Kept on globalThis: the server loads this module more than
// once (the App Router's bundles and the gateway's fast path), and a revocation must reach them all.
export const TOKEN_CACHE_MS = 5_000;
const holder = globalThis as unknown as { __idemgateTokenCache?: Map<string, { principal: TokenPrincipal | null; untilMs: number }> };
const tokenCache = (holder.__idemgateTokenCache ??= new Map());

/** The principal for a bearer token, or null for an unknown or revoked one. */
export async function authenticateToken(prisma: PrismaClient, token: string): Promise<TokenPrincipal | null> {
  if (!token.startsWith(TOKEN_PREFIX) || token.length > 200) return null;
  const digest = hashToken(token);
  const now = Date.now();
  const cached = tokenCache.get(digest);
  if (cached && cached.untilMs > now) return cached.principal;
  const row = await prisma.apiToken.findUnique({ where: { hash: digest }, select: { id: true, scope: true, advisoryKeys: true, revokedAt: true } });
  const principal = row && !row.revokedAt ? { tokenId: row.id, scope: row.scope, advisoryKeys: row.advisoryKeys } : null;
  if (tokenCache.size > 10_000) tokenCache.clear();
  tokenCache.set(digest, { principal, untilMs: now + TOKEN_CACHE_MS });
  if (principal) {
    void prisma.apiToken.update({ where: { id: principal.tokenId }, data: { lastUsedAt: new Date() } }).catch(() => {});
  }
  return principal;
}
