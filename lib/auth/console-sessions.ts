import { hash, randomBytes } from "node:crypto";
import { getIronSession, type IronSession, type SessionOptions } from "iron-session";
import type { PrismaClient } from "@/generated/prisma/client";
import type { HeaderSource } from "@/lib/http/answer";
import { servedOverHttps } from "@/lib/http/served-over-https";
import type { OperatorIdentity } from "./roles";
import { isRole } from "./roles";

// Console sessions: the cookie is sealed (iron-session) and carries only a session id; the session
// itself is a row of operator_sessions, kept under the SHA-256 of that id (as API tokens are), so
// the database holds no id a cookie could carry. Signing out revokes the row, disabling an operator revokes
// all of theirs, so a copied or remembered cookie stops working at once in every server process.
// Each request looks the row up by primary key, joined with its operator: the one query that
// re-read the operator before, so a polling console costs no more than it did.

export const SESSION_COOKIE = "idemgate_session";
export const SESSION_TTL_MS = 12 * 60 * 60 * 1000;

/** `cookies()` of next/headers, as iron-session uses it. */
export interface CookieJar {
  get(name: string): { name: string; value: string } | undefined;
  set(name: string, value: string, options?: Record<string, unknown>): void;
}

export interface SessionCookieOptions {
  /** the session secret (lib/auth/secret.ts) */
  password: string;
  /** set the cookie with the Secure attribute (the request came over HTTPS) */
  secure: boolean;
}

/**
 * Whether a cookie set in answer to this request is Secure: the request came over HTTPS (directly,
 * or through the trusted proxies that say so), or IDEMGATE_SECURE_COOKIES=1 asks for it always.
 */
export function cookieSecure(headers: HeaderSource, trustedProxies: number, env: Record<string, string | undefined> = process.env): boolean {
  return env.IDEMGATE_SECURE_COOKIES === "1" || servedOverHttps(headers, trustedProxies);
}

interface SessionData {
  sessionId?: string;
}

type Db = Pick<PrismaClient, "operatorSession" | "$queryRaw">;

/** A session id carries 256 random bits: a fast hash is the right tool (as for API tokens). */
function hashSessionId(sessionId: string): string {
  return hash("sha256", sessionId, "hex");
}

function ironOptions(options: SessionCookieOptions): SessionOptions {
  return {
    password: options.password,
    cookieName: SESSION_COOKIE,
    ttl: SESSION_TTL_MS / 1000,
    cookieOptions: { httpOnly: true, sameSite: "lax", secure: options.secure, path: "/" },
  };
}

// iron-session's cookie-store overload; it calls only get(name) and set(name, value, options) on it
const getCookieSession = getIronSession as unknown as <T extends object>(jar: CookieJar, options: SessionOptions) => Promise<IronSession<T>>;

function openCookie(jar: CookieJar, options: SessionCookieOptions) {
  return getCookieSession<SessionData>(jar, ironOptions(options));
}

/** A new session for the operator; its ended sessions are deleted on the way, so rows do not pile up. */
export async function createConsoleSession(prisma: Db, operatorId: string, nowMs = Date.now()): Promise<{ id: string; expiresAt: Date }> {
  const now = new Date(nowMs);
  await prisma.operatorSession.deleteMany({ where: { operatorId, OR: [{ expiresAt: { lte: now } }, { revokedAt: { not: null } }] } });
  const id = randomBytes(32).toString("base64url");
  const expiresAt = new Date(nowMs + SESSION_TTL_MS);
  await prisma.operatorSession.create({ data: { idHash: hashSessionId(id), operatorId, createdAt: now, expiresAt } });
  return { id, expiresAt };
}

/**
 * The operator of a live session: not revoked, not expired, the account not disabled. One round
 * trip: the session by primary key joined with its operator.
 */
export async function sessionOperator(prisma: Pick<PrismaClient, "$queryRaw">, sessionId: string, nowMs = Date.now()): Promise<OperatorIdentity | null> {
  const rows = await prisma.$queryRaw<{ expiresAt: Date; revokedAt: Date | null; id: string; email: string; role: string; disabledAt: Date | null }[]>`
    SELECT s.expires_at AS "expiresAt", s.revoked_at AS "revokedAt", o.id, o.email, o.role, o.disabled_at AS "disabledAt"
    FROM operator_sessions s JOIN operators o ON o.id = s.operator_id
    WHERE s.id_hash = ${hashSessionId(sessionId)}`;
  const row = rows[0];
  if (!row || row.revokedAt || new Date(row.expiresAt).getTime() <= nowMs) return null;
  if (row.disabledAt || !isRole(row.role)) return null;
  return { id: row.id, email: row.email, role: row.role };
}

export async function revokeConsoleSession(prisma: Db, sessionId: string, nowMs = Date.now()): Promise<boolean> {
  const out = await prisma.operatorSession.updateMany({ where: { idHash: hashSessionId(sessionId), revokedAt: null }, data: { revokedAt: new Date(nowMs) } });
  return out.count > 0;
}

/** Ends every session of one operator; `prisma` may be a transaction's client. How many were live. */
export async function revokeOperatorSessions(prisma: Db, operatorId: string, nowMs = Date.now()): Promise<number> {
  const now = new Date(nowMs);
  const out = await prisma.operatorSession.updateMany({ where: { operatorId, revokedAt: null, expiresAt: { gt: now } }, data: { revokedAt: now } });
  return out.count;
}

/** Signs the operator in: a new session, its id sealed into the cookie. */
export async function startCookieSession(jar: CookieJar, prisma: Db, operatorId: string, options: SessionCookieOptions): Promise<void> {
  const { id } = await createConsoleSession(prisma, operatorId);
  const cookie = await openCookie(jar, options);
  cookie.sessionId = id;
  await cookie.save();
}

/** The signed-in operator, or null: no cookie, one that does not unseal, or a session that has ended. */
export async function cookieOperator(jar: CookieJar, prisma: Db, options: SessionCookieOptions): Promise<OperatorIdentity | null> {
  const cookie = await openCookie(jar, options);
  // cookies from before sessions had rows carry no sessionId: they are not accepted
  if (typeof cookie.sessionId !== "string") return null;
  return sessionOperator(prisma, cookie.sessionId);
}

/** Signs out: the session is revoked on the server and the cookie cleared. */
export async function endCookieSession(jar: CookieJar, prisma: Db, options: SessionCookieOptions): Promise<void> {
  const cookie = await openCookie(jar, options);
  if (typeof cookie.sessionId === "string") await revokeConsoleSession(prisma, cookie.sessionId);
  cookie.destroy();
}
