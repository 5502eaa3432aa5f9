import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os, { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { bundledScript } from "@/test/support/bundled-script";

// each case starts the CLI as a process (tsx compiles it first): seconds each, more on a busy machine
vi.setConfig({ testTimeout: 120_000 });

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const BIN = path.join(ROOT, "bin", "idemgate.mjs");
const SERVER = process.env.TEST_POSTGRES_URL ?? "postgresql://postgres@127.0.0.1:5432";

function urlFor(database: string): string {
  const url = new URL(SERVER);
  url.pathname = `/${database}`;
  return url.toString();
}

async function admin<T>(fn: (client: pg.Client) => Promise<T>, database = "postgres"): Promise<T> {
  const client = new pg.Client({ connectionString: urlFor(database), connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the real CLI as a user would: `node bin/idemgate.mjs …`, from another directory. */
function idemgate(args: string[], options: { env?: Record<string, string>; stdin?: string } = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: tmpdir(),
      // the demo tools stay on with DATABASE_URL (key probe asks payments.charge)
      // IDEMGATE_CLI_BUNDLE=1: the bundle bin/idemgate.mjs runs must load (no fallback to tsx)
      env: { ...process.env, DATABASE_URL: "", REDIS_URL: "", IDEMGATE_DATA_DIR: dataDir, IDEMGATE_DEMO_TOOLS: "1", IDEMGATE_CLI_BUNDLE: "1", ...options.env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c) => (stdout += c));
    child.stderr.on("data", (c) => (stderr += c));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(options.stdin ?? "");
  });
}

let database = "";
let databaseUrl = "";
let dataDir = "";
let ready: Promise<void>;

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), "idemgate-cli-"));
  database = `idemgate_test_cli_${randomBytes(6).toString("hex")}`;
  databaseUrl = urlFor(database);
  ready = admin((c) => c.query(`CREATE DATABASE "${database}"`)).then(() => {});
  ready.catch(() => {});
});

// Awaited per test: with PostgreSQL down every test fails, none is skipped.
beforeEach(() => ready);

afterAll(async () => {
  await admin((c) => c.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`)).catch(() => {});
  await rm(dataDir, { recursive: true, force: true });
});

const db = () => ({ env: { DATABASE_URL: databaseUrl } });

/** An expected error is one readable line, no stack trace. */
function expectReadableError(run: Run, pattern: RegExp) {
  expect(run.code).not.toBe(0);
  expect(run.stderr).toMatch(pattern);
  expect(run.stderr).not.toMatch(/\n\s+at /);
}

describe("migrate and seed", () => {
  it("migrate applies the migrations once, then says the database is up to date", async () => {
    const first = await idemgate(["migrate"], db());
    expect(first.stderr).toBe("");
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(/^Applied \d+ migrations? to postgresql:/);
    expect(first.stdout).toMatch(/_init/);
    const second = await idemgate(["migrate"], db());
    expect(second.code).toBe(0);
    expect(second.stdout).toMatch(/is up to date \(\d+ migrations, latest /);
  });

  it("seed prints the demo credentials once, then says it is already seeded", async () => {
    const first = await idemgate(["seed"], db());
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(/operator: +admin@idemgate\.local/);
    expect(first.stdout).toMatch(/API token: idg_/);
    expect(await readFile(path.join(dataDir, "credentials.txt"), "utf8")).toBe(first.stdout);
    const second = await idemgate(["seed"], db());
    expect(second.code).toBe(0);
    expect(second.stdout).toMatch(/^Already seeded/);
  });

  it("reconcile runs one pass and says what it flagged", async () => {
    const run = await idemgate(["reconcile"], db());
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^Examined 0 executions/);
    expect(run.stdout).toMatch(/Nothing flagged\./);
    const json = await idemgate(["reconcile", "--json"], db());
    expect(JSON.parse(json.stdout)).toMatchObject({ flagged: [], created: 0 });
  });
});

describe("reconcile and the configuration file's webhooks", () => {
  it("queues the events of what the pass opens for each endpoint, once however often it runs; a refused file queues nothing", async () => {
    await idemgate(["migrate"], db());
    const now = Date.now();
    // a ledger posting whose call ended without knowing whether it went through (ledger.record runs
    // in its caller's process: nothing to ask, the pass opens an anomaly)
    await admin(async (c) => {
      await c.query(
        `INSERT INTO idempotency_keys (scope, key, tool, fingerprint, status, token, created_at_ms, lease_until_ms, deadline_ms, execution_id, outcome_note, unknown_at_ms)
         VALUES ('cli', 'posting-1', 'ledger.record', 'fp', 'unknown', 1, $1, $2, $1, 'ex-hook-1', 'the ledger timed out', $1)`,
        [now, now + 60_000],
      );
      await c.query(
        `INSERT INTO executions (id, scope, key, tool, fingerprint, token, started_at, lease_until, outcome, finished_at, error)
         VALUES ('ex-hook-1', 'cli', 'posting-1', 'ledger.record', 'fp', 1, $1, $2, 'unknown', $1, 'the ledger timed out')`,
        [new Date(now), new Date(now + 60_000)],
      );
    }, database);
    const config = path.join(dataDir, "hooks.config.yaml");
    await writeFile(
      config,
      `webhooks:\n  - { name: ops, url: "http://127.0.0.1:9/ops", secret: "\${CLI_HOOK_SECRET}" }\n  - { name: oncall, url: "http://127.0.0.1:9/oncall", secret: "\${CLI_HOOK_SECRET}", events: [anomaly.opened] }\n`,
    );
    const deliveries = async () =>
      (await admin((c) => c.query(`SELECT endpoint, event_type AS type, status FROM webhook_deliveries ORDER BY endpoint, event_type`), database)).rows;

    // the secret must come from the environment: without it the file is refused and nothing is queued
    expectReadableError(await idemgate(["reconcile"], { env: { ...db().env, IDEMGATE_CONFIG: config } }), /webhooks\[0\]\.secret: the environment variable CLI_HOOK_SECRET is not set/);
    expect(await deliveries()).toEqual([]);

    const env = { ...db().env, IDEMGATE_CONFIG: config, CLI_HOOK_SECRET: "whsec_cli_0123456789abcdef" };
    const run = await idemgate(["reconcile"], { env });
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/orphan_unknown_outcome +ledger\.record +cli +posting-1/);
    expect(run.stdout).toContain("Queued their webhook events for ops, oncall; a running server sends them.");
    const queued = [
      { endpoint: "oncall", type: "anomaly.opened", status: "pending" },
      { endpoint: "ops", type: "anomaly.opened", status: "pending" },
      { endpoint: "ops", type: "key.unknown", status: "pending" },
    ];
    expect(await deliveries()).toEqual(queued);
    // another pass (the CLI's or a server's) finds the same and queues nothing more
    expect((await idemgate(["reconcile"], { env })).code).toBe(0);
    expect(await deliveries()).toEqual(queued);
  });
});

describe("key probe", () => {
  it("asks the key's tool: a demo charge that exists resolves its unknown key; an absent key is a readable error", async () => {
    await idemgate(["migrate"], db());
    const now = Date.now();
    // what a charge whose answer was lost leaves behind: the charge, and its key held as unknown
    await admin(async (c) => {
      await c.query(
        `INSERT INTO idempotency_keys (scope, key, tool, fingerprint, status, token, created_at_ms, lease_until_ms, deadline_ms, execution_id, outcome_note, unknown_at_ms)
         VALUES ('cli', 'order-1', 'payments.charge', 'fp', 'unknown', 1, $1, $2, $1, 'ex-1', 'the tool threw: socket hang up', $1)`,
        [now, now + 60_000],
      );
      await c.query(
        `INSERT INTO demo_charges (id, scope, customer_id, amount_cents, currency, idempotency_key, created_at) VALUES ('ch_cli', 'cli', 'cus_cli', 500, 'EUR', 'order-1', now())`,
      );
    }, database);

    const run = await idemgate(["key", "probe", "--scope", "cli", "--key", "order-1"], db());
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout.trim()).toBe("The tool says it happened: cli/order-1 is resolved with its result (HTTP 200); retries get that result.");
    const shown = JSON.parse((await idemgate(["key", "show", "--scope", "cli", "--key", "order-1"], db())).stdout);
    expect(shown).toMatchObject({ state: "done" });
    const trail = await admin((c) => c.query(`SELECT actor, action FROM operator_actions WHERE scope = 'cli' AND key = 'order-1'`), database);
    expect(trail.rows).toEqual([{ actor: expect.stringMatching(/^cli:/), action: "resolve" }]);

    expectReadableError(await idemgate(["key", "probe", "--scope", "cli", "--key", "order-2"], db()), /^idemgate: there is no record under cli\/order-2/);
    expectReadableError(await idemgate(["key", "probe", "--scope", "cli", "--key", "order-1"], db()), /^idemgate: only stuck or unknown keys are asked about; this key is done/);
  });
});

describe("key release and resolve --token", () => {
  it("decide only while the call whose token was given holds the key; a bad token is a readable error that changes nothing", async () => {
    await idemgate(["migrate"], db());
    const now = Date.now();
    await admin(
      (c) =>
        c.query(
          `INSERT INTO idempotency_keys (scope, key, tool, fingerprint, status, token, created_at_ms, lease_until_ms, deadline_ms, execution_id, outcome_note, unknown_at_ms)
           VALUES ('cli', 'order-9', 'payments.charge', 'fp', 'unknown', 42, $1, $2, $1, 'ex-9', 'the service answered 502', $1)`,
          [now, now + 60_000],
        ),
      database,
    );
    const release = (token: string) => idemgate(["key", "release", "--scope", "cli", "--key", "order-9", "--reason", "no charge at the PSP", "--token", token], db());
    expectReadableError(await release("x1"), /^idemgate: --token must be the key's fencing token, a positive whole number \(got "x1"\)/);
    expectReadableError(await release("41"), /^idemgate: another call holds this key now/);
    expectReadableError(
      await idemgate(["key", "resolve", "--scope", "cli", "--key", "order-9", "--reason", "charged", "--result", "{}", "--token", "41"], db()),
      /^idemgate: another call holds this key now/,
    );
    expect(JSON.parse((await idemgate(["key", "show", "--scope", "cli", "--key", "order-9"], db())).stdout)).toMatchObject({ state: "unknown", token: 42 });
    const ok = await release("42");
    expect(ok.stderr).toBe("");
    expect(ok.stdout).toMatch(/^Released cli\/order-9 \(was unknown\)/);
    const trail = await admin((c) => c.query(`SELECT action FROM operator_actions WHERE scope = 'cli' AND key = 'order-9'`), database);
    expect(trail.rows).toEqual([{ action: "release" }]);
  });
});

describe("key show and release of keys holding URL characters", () => {
  it("names exactly the key given: order%41-1 is not orderA-1, a bare % and / + # ? spaces are characters of the key", async () => {
    await idemgate(["migrate"], db());
    const now = Date.now();
    const keys = ["order%41-1", "100%", "a/b+c#d?e f", "caf%C3%A9", "orderA-1"];
    await admin(async (c) => {
      for (const [i, key] of keys.entries()) {
        await c.query(
          `INSERT INTO idempotency_keys (scope, key, tool, fingerprint, status, token, created_at_ms, lease_until_ms, deadline_ms, execution_id, outcome_note, unknown_at_ms)
           VALUES ('cli-url', $1, 'payments.charge', 'fp', 'unknown', $2, $3, $4, $3, $5, 'the service answered 502', $3)`,
          [key, i + 1, now, now + 60_000, `ex-url-${i}`],
        );
      }
    }, database);
    const shown = await idemgate(["key", "show", "--scope", "cli-url", "--key", "order%41-1"], db());
    expect(shown.stderr).toBe("");
    expect(JSON.parse(shown.stdout)).toMatchObject({ key: "order%41-1", state: "unknown", token: 1 });
    for (const key of keys.slice(0, 4)) {
      const released = await idemgate(["key", "release", "--scope", "cli-url", "--key", key, "--reason", "no charge at the PSP"], db());
      expect(released.stderr).toBe("");
      expect(released.stdout).toContain(`Released cli-url/${key} (was unknown)`);
    }
    const left = await admin((c) => c.query(`SELECT key FROM idempotency_keys WHERE scope = 'cli-url'`), database);
    expect(left.rows).toEqual([{ key: "orderA-1" }]);
  }, 300_000);
});

describe("token", () => {
  it("create prints the token once with its id; list shows it without the secret; revoke revokes it", async () => {
    const created = await idemgate(["token", "create", "--scope", "acme", "--label", "ci runner"], db());
    expect(created.code).toBe(0);
    const token = /\b(idg_[A-Za-z0-9_-]{20,})\b/.exec(created.stdout)?.[1];
    const id = /\(id ([0-9a-f-]{36})\)/.exec(created.stdout)?.[1];
    expect(token).toBeDefined();
    expect(id).toBeDefined();
    expect(created.stdout).toMatch(/scope "acme"/);

    const listed = await idemgate(["token", "list"], db());
    expect(listed.code).toBe(0);
    const row = listed.stdout.split("\n").find((line) => line.startsWith(id!));
    expect(row).toMatch(/acme .* ci runner .* active$/);
    expect(listed.stdout).not.toContain(token!);

    expectReadableError(await idemgate(["token", "revoke", id!], db()), /required option '--reason <text>' not specified/);
    const revoked = await idemgate(["token", "revoke", id!, "--reason", "the runner was retired"], db());
    expect(revoked.code).toBe(0);
    expect(revoked.stdout).toContain(`Revoked API token ${id}`);

    const json = await idemgate(["token", "list", "--json"], db());
    const rows = JSON.parse(json.stdout) as { id: string; revokedAt: string | null }[];
    expect(rows.find((r) => r.id === id)?.revokedAt).toEqual(expect.any(String));

    expectReadableError(await idemgate(["token", "revoke", id!, "--reason", "again"], db()), /^idemgate: no active API token with id /);

    // both recorded in the operator audit trail with the command line's actor; the failed revoke is not
    const trail = await admin(
      (c) => c.query(`SELECT actor, action, scope, reason, state_after->>'tokenId' AS "tokenId" FROM operator_actions WHERE state_after->>'tokenId' = $1 ORDER BY at`, [id]),
      database,
    );
    const actor = `cli:${os.userInfo().username}@${os.hostname()}`;
    expect(trail.rows).toEqual([
      { actor, action: "token_create", scope: "acme", reason: "ci runner", tokenId: id },
      { actor, action: "token_revoke", scope: "acme", reason: "the runner was retired", tokenId: id },
    ]);
  }, 120_000);

  it("create --json prints machine-readable output", async () => {
    const created = await idemgate(["token", "create", "--scope", "json-scope", "--json"], db());
    expect(created.code).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({ id: expect.any(String), token: expect.stringMatching(/^idg_/), scope: "json-scope", advisoryKeys: false });
  });

  it("create --advisory-keys makes a token whose keys count as minted by a model", async () => {
    const created = await idemgate(["token", "create", "--scope", "agents", "--advisory-keys", "--json"], db());
    expect(created.code).toBe(0);
    const { token, advisoryKeys } = JSON.parse(created.stdout);
    expect(advisoryKeys).toBe(true);
    const { authenticateToken } = await import("@/lib/auth/api-tokens");
    const { openDatabase } = await import("@/lib/db/database");
    const database = await openDatabase({ url: databaseUrl, migrate: false });
    try {
      expect(await authenticateToken(database.prisma, token)).toMatchObject({ scope: "agents", advisoryKeys: true });
    } finally {
      await database.close();
    }
  });

  it("refuses a missing or invalid scope with a readable message", async () => {
    expectReadableError(await idemgate(["token", "create"], db()), /required option '--scope <name>' not specified/);
    expectReadableError(await idemgate(["token", "create", "--scope", "bad scope!"], db()), /^idemgate: scope "bad scope!" is invalid/);
  });
});

describe("tool pause and resume", () => {
  it("pauses a write tool with a reason and resumes it, both in the audit trail; a read, an unknown tool or no reason is a readable error", async () => {
    expectReadableError(await idemgate(["tool", "pause", "payments.charge"], db()), /required option '--reason <text>' not specified/);
    expectReadableError(await idemgate(["tool", "pause", "payments.nothing", "--reason", "provider incident"], db()), /no tool named "payments.nothing"/);
    expectReadableError(await idemgate(["tool", "pause", "payments.list_charges", "--reason", "provider incident"], db()), /payments.list_charges is a read/);
    expectReadableError(await idemgate(["tool", "resume", "payments.charge", "--reason", "not paused yet"], db()), /payments.charge is not paused/);

    const paused = await idemgate(["tool", "pause", "payments.charge", "--reason", "provider incident", "--json"], db());
    expect(paused.code).toBe(0);
    expect(JSON.parse(paused.stdout)).toMatchObject({ tool: "payments.charge", paused: true, reason: "provider incident", source: "operator" });
    expect((await admin((c) => c.query(`SELECT tool, reason FROM paused_tools`), database)).rows).toEqual([{ tool: "payments.charge", reason: "provider incident" }]);

    const resumed = await idemgate(["tool", "resume", "payments.charge", "--reason", "provider fixed it"], db());
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toContain("Resumed payments.charge");
    expect((await admin((c) => c.query(`SELECT tool FROM paused_tools`), database)).rows).toEqual([]);
    const trail = await admin((c) => c.query(`SELECT actor, action, reason FROM operator_actions WHERE action LIKE 'tool_%' ORDER BY at`), database);
    const actor = `cli:${os.userInfo().username}@${os.hostname()}`;
    expect(trail.rows).toEqual([
      { actor, action: "tool_pause", reason: "provider incident" },
      { actor, action: "tool_resume", reason: "provider fixed it" },
    ]);
  });
});

describe("operator create", () => {
  it("reads the password from a pipe (first line) and creates the operator", async () => {
    const run = await idemgate(["operator", "create", "--email", "Ops@Example.com", "--role", "viewer"], { ...db(), stdin: "a-long-enough-password\nignored\n" });
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^Created viewer ops@example\.com \(id [0-9a-f-]{36}\)/);
    const rows = await admin((c) => c.query(`SELECT email, role, password_hash FROM operators WHERE email = 'ops@example.com'`), database);
    expect(rows.rows).toHaveLength(1);
    expect(rows.rows[0].role).toBe("viewer");
    expect(rows.rows[0].password_hash).toMatch(/^\$argon2id\$/);
    expect(rows.rows[0].password_hash).not.toContain("a-long-enough-password");

    expectReadableError(
      await idemgate(["operator", "create", "--email", "ops@example.com", "--role", "operator"], { ...db(), stdin: "a-long-enough-password\n" }),
      /^idemgate: an operator with the email ops@example\.com exists already/,
    );
  });

  it("refuses a bad role before asking for anything", async () => {
    const run = await idemgate(["operator", "create", "--email", "x@example.com", "--role", "admin"], { ...db(), stdin: "a-long-enough-password\n" });
    expectReadableError(run, /argument 'admin' is invalid\. Allowed choices are viewer, operator/);
  });

  it("refuses a short password, an empty stdin and a bad email readably", async () => {
    expectReadableError(
      await idemgate(["operator", "create", "--email", "y@example.com", "--role", "operator"], { ...db(), stdin: "short\n" }),
      /^idemgate: the password must have at least 12 characters \(it has 5\); nothing was created/,
    );
    expectReadableError(await idemgate(["operator", "create", "--email", "y@example.com", "--role", "operator"], db()), /^idemgate: no password on stdin/);
    expectReadableError(
      await idemgate(["operator", "create", "--email", "not-an-email", "--role", "operator"], { ...db(), stdin: "a-long-enough-password\n" }),
      /^idemgate: "not-an-email" is not an email address/,
    );
    const count = await admin((c) => c.query(`SELECT count(*)::int AS n FROM operators WHERE email = 'y@example.com'`), database);
    expect(count.rows[0].n).toBe(0);
  });
});

describe("operator disable", () => {
  it("disables the account, ends its console sessions and records who did it", async () => {
    const created = await idemgate(["operator", "create", "--email", "leaver@example.com", "--role", "operator"], { ...db(), stdin: "a-long-enough-password\n" });
    expect(created.code).toBe(0);
    // the account is signed in to the console twice
    await admin(
      (c) =>
        c.query(
          `INSERT INTO operator_sessions (id_hash, operator_id, created_at, expires_at)
           SELECT s.id, o.id, now(), now() + interval '12 hours' FROM operators o, (VALUES ('cli-session-a'), ('cli-session-b')) AS s(id)
           WHERE o.email = 'leaver@example.com'`,
        ),
      database,
    );

    const run = await idemgate(["operator", "disable", "--email", "Leaver@Example.com", "--reason", "left the company"], db());
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toBe("Disabled leaver@example.com (2 sessions ended).\n");
    const account = await admin((c) => c.query(`SELECT disabled_at FROM operators WHERE email = 'leaver@example.com'`), database);
    expect(account.rows[0].disabled_at).not.toBeNull();
    const sessions = await admin((c) => c.query(`SELECT count(*)::int AS n FROM operator_sessions WHERE revoked_at IS NULL`), database);
    expect(sessions.rows[0].n).toBe(0);
    const trail = await admin((c) => c.query(`SELECT actor, reason, state_after->>'email' AS email FROM operator_actions WHERE action = 'operator_disable'`), database);
    expect(trail.rows).toEqual([{ actor: expect.stringMatching(/^cli:.+@.+/), reason: "left the company", email: "leaver@example.com" }]);

    const again = await idemgate(["operator", "disable", "--email", "leaver@example.com"], db());
    expect(again.code).toBe(0);
    expect(again.stdout).toBe("leaver@example.com was disabled already (0 sessions ended).\n");
    expectReadableError(await idemgate(["operator", "disable", "--email", "nobody@example.com"], db()), /^idemgate: no operator with the email nobody@example\.com/);
  });
});

describe("operator enable", () => {
  it("lets a disabled account sign in again, records who did it, and changes nothing on an enabled one", async () => {
    const created = await idemgate(["operator", "create", "--email", "returner@example.com", "--role", "viewer"], { ...db(), stdin: "a-long-enough-password\n" });
    expect(created.code).toBe(0);
    expect((await idemgate(["operator", "disable", "--email", "returner@example.com"], db())).code).toBe(0);

    const run = await idemgate(["operator", "enable", "--email", "Returner@Example.com", "--reason", "back from leave"], db());
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toBe("Enabled returner@example.com.\n");
    const account = await admin((c) => c.query(`SELECT disabled_at FROM operators WHERE email = 'returner@example.com'`), database);
    expect(account.rows[0].disabled_at).toBeNull();
    const trail = await admin(
      (c) =>
        c.query(
          `SELECT actor, reason, state_before->>'email' AS email, state_before->>'disabledAt' IS NOT NULL AS "wasDisabled", state_after->>'disabledAt' AS "disabledAt"
           FROM operator_actions WHERE action = 'operator_enable'`,
        ),
      database,
    );
    expect(trail.rows).toEqual([{ actor: expect.stringMatching(/^cli:.+@.+/), reason: "back from leave", email: "returner@example.com", wasDisabled: true, disabledAt: null }]);

    const again = await idemgate(["operator", "enable", "--email", "returner@example.com"], db());
    expect(again.code).toBe(0);
    expect(again.stdout).toBe("returner@example.com was enabled already.\n");
    const trailCount = await admin((c) => c.query(`SELECT count(*)::int AS n FROM operator_actions WHERE action = 'operator_enable'`), database);
    expect(trailCount.rows[0].n).toBe(1);
    expectReadableError(await idemgate(["operator", "enable", "--email", "nobody@example.com"], db()), /^idemgate: no operator with the email nobody@example\.com/);
    expectReadableError(await idemgate(["operator", "enable", "--email", "returner@example.com", "--reason", " "], db()), /--reason must not be empty/);
  });
});

describe("the embedded database held by a running server", () => {
  it("refuses with the lock's message and exit code 1, and leaves the lock alone", async () => {
    const held = await mkdtemp(path.join(tmpdir(), "idemgate-held-"));
    // another process holds the lock of <IDEMGATE_DATA_DIR>/pglite, as a running server does
    const holder = spawn(process.execPath, [await bundledScript("test/support/lock-holder.ts"), "lock", path.join(held, "pglite")], {
      cwd: ROOT,
      stdio: ["pipe", "pipe", "inherit"],
    });
    try {
      const answer = await new Promise<string>((resolve, reject) => {
        let out = "";
        holder.stdout.on("data", (chunk) => {
          out += chunk;
          const won = out.split("\n").find((line) => line.includes('"won"'));
          if (won) resolve(won);
        });
        holder.on("close", () => reject(new Error(`the lock holder exited: ${out}`)));
      });
      expect(JSON.parse(answer)).toEqual({ won: true, pid: holder.pid });
      const open = `idemgate: the embedded database in ${path.join(held, "pglite")} is open in another process (pid ${holder.pid}).`;
      const run = await idemgate(["migrate"], { env: { IDEMGATE_DATA_DIR: held } });
      expect(run.code).toBe(1);
      expect(run.stderr.trim()).toBe(`${open} Stop that process, or run this command through the running server, or set DATABASE_URL to use a PostgreSQL server.`);
      expect(run.stdout).toBe("");
      // token commands go through a server that published its address (e2e/tokens.spec.ts); this
      // holder published none, and then one left over from an earlier start (another pid)
      for (const published of [null, { pid: holder.pid! + 1, url: "http://127.0.0.1:1", token: "idgl_left-over" }]) {
        if (published) await writeFile(path.join(held, "server.json"), JSON.stringify(published));
        for (const args of [["token", "list"], ["token", "create", "--scope", "demo"], ["token", "revoke", "some-id", "--reason", "gone"]]) {
          const run = await idemgate(args, { env: { IDEMGATE_DATA_DIR: held } });
          expect(run.code).toBe(1);
          expect(run.stderr.trim()).toBe(
            `${open} It publishes no address for the command line (a server started with \`npm start\` does, once it listens). ` +
              `Wait until it is ready, or stop it, or set DATABASE_URL to use a PostgreSQL server.`,
          );
          expect(run.stdout).toBe("");
        }
      }
      expect((await readFile(path.join(held, "pglite.lock"), "utf8")).trim()).toBe(String(holder.pid));
    } finally {
      holder.kill("SIGKILL");
      await rm(held, { recursive: true, force: true });
    }
  });
});

describe("usage errors", () => {
  it("an unknown command, or simulate without a token or at a remote host, is one readable line", async () => {
    expectReadableError(await idemgate(["frobnicate"]), /unknown command 'frobnicate'/);
    expectReadableError(await idemgate(["simulate"], { env: { IDEMGATE_TOKEN: "" } }), /^idemgate: simulate needs an API token/);
    expectReadableError(
      await idemgate(["simulate", "--url", "https://example.com", "--token", "idg_x", "--duration", "1s"]),
      /^idemgate: simulate only talks to a loopback address or the configured server/,
    );
    expectReadableError(await idemgate(["simulate", "--token", "idg_x", "--duration", "soon"]), /"soon" is not a duration/);
  });
});
