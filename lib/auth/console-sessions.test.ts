import { createHash, randomBytes } from "node:crypto";
import { sealData, unsealData } from "iron-session";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "@/lib/db/database";
import { createTestPglite, createTestPostgres } from "@/test/support/databases";
import {
  cookieOperator,
  cookieSecure,
  createConsoleSession,
  endCookieSession,
  revokeConsoleSession,
  SESSION_COOKIE,
  SESSION_TTL_MS,
  sessionOperator,
  startCookieSession,
  type CookieJar,
} from "./console-sessions";
import { createOperator, disableOperator, verifyOperatorCredentials } from "./operators";

const PASSWORD = "the-right-password-1";
const SECRET = randomBytes(32).toString("base64url");

/** A browser's cookie jar for one site, as Next's cookies() presents it: what was set, and how. */
class Jar implements CookieJar {
  private readonly values = new Map<string, string>();
  lastSet: { name: string; value: string; options: Record<string, unknown> } | null = null;

  constructor(value?: string) {
    if (value !== undefined) this.values.set(SESSION_COOKIE, value);
  }

  get(name: string) {
    const value = this.values.get(name);
    return value === undefined ? undefined : { name, value };
  }

  set(name: string, value: string, options: Record<string, unknown> = {}) {
    this.lastSet = { name, value, options };
    if (value === "" || options.maxAge === 0) this.values.delete(name);
    else this.values.set(name, value);
  }

  /** the cookie's value, as a browser (or someone who copied it) would send it back */
  value(): string {
    const value = this.values.get(SESSION_COOKIE);
    if (!value) throw new Error("no session cookie");
    return value;
  }
}

const plain = { password: SECRET, secure: false };
const headers = (proto?: string) => new Headers(proto === undefined ? {} : { "x-forwarded-proto": proto });

describe.each(["PostgreSQL", "PGlite"] as const)("console sessions on %s", (kind) => {
  let t: { db: Database; drop: () => Promise<void> };
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    t = kind === "PostgreSQL" ? await createTestPostgres("console_sessions") : await createTestPglite();
    for (const name of ["ada", "grace", "linus", "ken", "old"]) {
      ids[name] = (await createOperator(t.db.prisma, { email: `${name}@example.com`, password: PASSWORD, role: "operator" })).id;
    }
  }, 120_000);
  afterAll(() => t?.drop());

  async function signIn(operatorId: string, options = plain): Promise<Jar> {
    const jar = new Jar();
    await startCookieSession(jar, t.db.prisma, operatorId, options);
    return jar;
  }

  it("signing out ends the session on the server: the old cookie is refused afterwards", async () => {
    const browser = await signIn(ids.ada);
    const copied = browser.value();
    expect(await cookieOperator(new Jar(copied), t.db.prisma, plain)).toMatchObject({ id: ids.ada, email: "ada@example.com", role: "operator" });

    await endCookieSession(browser, t.db.prisma, plain);
    expect(browser.lastSet).toMatchObject({ name: SESSION_COOKIE, value: "", options: { maxAge: 0 } });
    expect(browser.get(SESSION_COOKIE)).toBeUndefined();
    // the same cookie, sent again (kept by another tab, or copied), is signed out too
    expect(await cookieOperator(new Jar(copied), t.db.prisma, plain)).toBeNull();
    // and a new sign-in is a new session
    const again = await signIn(ids.ada);
    expect(again.value()).not.toBe(copied);
    expect(await cookieOperator(new Jar(again.value()), t.db.prisma, plain)).toMatchObject({ id: ids.ada });
  });

  it("keeps no cookie's session id in the database, only its SHA-256; signing in and out still work", async () => {
    const browser = await signIn(ids.ada);
    const { sessionId } = await unsealData<{ sessionId?: string }>(browser.value(), { password: SECRET });
    expect(sessionId).toMatch(/^[A-Za-z0-9_-]{43}$/);
    // every column of every session row, as text: none holds the id, nor any part of it
    const rows = await t.db.prisma.$queryRawUnsafe<{ row: string }[]>("SELECT row_to_json(s)::text AS row FROM operator_sessions s");
    expect(rows.length).toBeGreaterThan(0);
    for (const { row } of rows) expect(row).not.toContain(sessionId!.slice(0, 16));
    const digest = createHash("sha256").update(sessionId!).digest("hex");
    expect(rows.some(({ row }) => JSON.parse(row).id_hash === digest)).toBe(true);

    // the cookie signs in; the hash, sent as if it were the id, does not
    expect(await cookieOperator(new Jar(browser.value()), t.db.prisma, plain)).toMatchObject({ id: ids.ada });
    expect(await sessionOperator(t.db.prisma, digest)).toBeNull();
    const forged = await sealData({ sessionId: digest }, { password: SECRET });
    expect(await cookieOperator(new Jar(forged), t.db.prisma, plain)).toBeNull();
    await endCookieSession(browser, t.db.prisma, plain);
    expect(await sessionOperator(t.db.prisma, sessionId!)).toBeNull();
  });

  it("disabling an operator ends every session of theirs at once, and no one else's", async () => {
    const laptop = (await signIn(ids.grace)).value();
    const phone = (await signIn(ids.grace)).value();
    const colleague = (await signIn(ids.linus)).value();
    expect(await cookieOperator(new Jar(laptop), t.db.prisma, plain)).toMatchObject({ id: ids.grace });

    const out = await disableOperator(t.db.prisma, { email: " Grace@Example.com ", actor: "cli:root@host", reason: "left the team" });
    expect(out).toEqual({ operator: { id: ids.grace, email: "grace@example.com" }, alreadyDisabled: false, sessionsEnded: 2 });
    expect(await cookieOperator(new Jar(laptop), t.db.prisma, plain)).toBeNull();
    expect(await cookieOperator(new Jar(phone), t.db.prisma, plain)).toBeNull();
    expect(await cookieOperator(new Jar(colleague), t.db.prisma, plain)).toMatchObject({ id: ids.linus });
    // no new sign-in either
    expect(await verifyOperatorCredentials(t.db.prisma, "grace@example.com", PASSWORD)).toBeNull();

    const trail = await t.db.prisma.operatorAction.findMany({ where: { action: "operator_disable" } });
    expect(trail).toHaveLength(1);
    expect(trail[0]).toMatchObject({ actor: "cli:root@host", reason: "left the team", stateAfter: { operatorId: ids.grace, email: "grace@example.com", sessionsEnded: 2 } });

    // again: nothing left to end, nothing new recorded
    expect(await disableOperator(t.db.prisma, { email: "grace@example.com", actor: "cli:root@host", reason: "again" })).toMatchObject({ alreadyDisabled: true, sessionsEnded: 0 });
    expect(await t.db.prisma.operatorAction.count({ where: { action: "operator_disable" } })).toBe(1);
    await expect(disableOperator(t.db.prisma, { email: "nobody@example.com", actor: "cli:root@host", reason: "x" })).rejects.toThrow(/no operator with the email nobody@example\.com/);
  });

  it("a session ends when it expires, and its row is cleared at the operator's next sign-in", async () => {
    const t0 = Date.now();
    const { id } = await createConsoleSession(t.db.prisma, ids.ken, t0 - SESSION_TTL_MS - 10_000);
    expect(await sessionOperator(t.db.prisma, id, t0 - 10_001)).toMatchObject({ id: ids.ken });
    expect(await sessionOperator(t.db.prisma, id, t0 - 10_000)).toBeNull();
    expect(await sessionOperator(t.db.prisma, id, t0)).toBeNull();
    // a second one, signed out before the first had expired
    const second = await createConsoleSession(t.db.prisma, ids.ken, t0 - 20_000);
    expect(await revokeConsoleSession(t.db.prisma, second.id)).toBe(true);
    expect(await revokeConsoleSession(t.db.prisma, second.id)).toBe(false);
    expect(await t.db.prisma.operatorSession.count({ where: { operatorId: ids.ken } })).toBe(2);
    await signIn(ids.ken);
    // the expired and the signed-out session are gone; the new one is left
    expect(await t.db.prisma.operatorSession.count({ where: { operatorId: ids.ken } })).toBe(1);
  });

  it("refuses cookies that name no live session: tampered, sealed with another secret, or from before sessions had rows", async () => {
    const good = (await signIn(ids.old)).value();
    const tampered = good.slice(0, -4) + (good.endsWith("AAAA") ? "BBBB" : "AAAA");
    expect(await cookieOperator(new Jar(tampered), t.db.prisma, plain)).toBeNull();
    expect(await cookieOperator(new Jar(good), t.db.prisma, { password: randomBytes(32).toString("base64url"), secure: false })).toBeNull();
    // the earlier cookie format named the operator itself: it could not be ended, so it is not taken
    const legacy = await sealData({ operatorId: ids.old }, { password: { 1: SECRET }, ttl: SESSION_TTL_MS / 1000 });
    expect(await cookieOperator(new Jar(legacy), t.db.prisma, plain)).toBeNull();
    const forged = await sealData({ sessionId: "not-a-session" }, { password: { 1: SECRET }, ttl: SESSION_TTL_MS / 1000 });
    expect(await cookieOperator(new Jar(forged), t.db.prisma, plain)).toBeNull();
    expect(await cookieOperator(new Jar(), t.db.prisma, plain)).toBeNull();
  });

  it("the cookie is Secure over HTTPS, directly or behind a trusted proxy that says so, and not over plain HTTP", async () => {
    const setOver = async (secure: boolean) => {
      const jar = await signIn(ids.ada, { password: SECRET, secure });
      return jar.lastSet!.options;
    };
    // reached over HTTPS directly: scripts/serve.mjs wrote the connection's scheme
    expect(await setOver(cookieSecure(headers("https"), 0, {}))).toMatchObject({ secure: true, httpOnly: true, sameSite: "lax", path: "/" });
    // behind one trusted proxy that terminated TLS
    expect(await setOver(cookieSecure(headers("https"), 1, {}))).toMatchObject({ secure: true });
    expect(await setOver(cookieSecure(headers("http, https"), 1, {}))).toMatchObject({ secure: true });
    // plain HTTP, directly or through the proxy (whatever the client wrote before it)
    expect(await setOver(cookieSecure(headers("http"), 0, {}))).toMatchObject({ secure: false });
    expect(await setOver(cookieSecure(headers("https, http"), 1, {}))).toMatchObject({ secure: false });
    expect(await setOver(cookieSecure(headers(), 1, {}))).toMatchObject({ secure: false });
    // IDEMGATE_SECURE_COOKIES=1: always
    expect(await setOver(cookieSecure(headers("http"), 0, { IDEMGATE_SECURE_COOKIES: "1" }))).toMatchObject({ secure: true });
    // signing out clears the cookie with the same attributes
    const jar = await signIn(ids.ada, { password: SECRET, secure: true });
    await endCookieSession(jar, t.db.prisma, { password: SECRET, secure: true });
    expect(jar.lastSet!.options).toMatchObject({ secure: true, maxAge: 0 });
  });
});
