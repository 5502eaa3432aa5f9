import { chmod, lstat, readdir } from "node:fs/promises";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { testPort } from "@/scripts/test-ports.mjs";
import { removeDataDir, ROOT, startServer, useMigratedEmbeddedDatabase, type RunningServer } from "@/test/support/server";

// The data directory (the embedded database: every tenant's results and kept arguments, password
// and token hashes) is the owner's only, whatever the umask the server starts with: a real server
// from the production build, started under umask 022 on an empty directory, then on one left open
// to others. Port 3147 is this file's (moved by IDEMGATE_TEST_PORT_BASE).

const port = testPort(3147);
const dataDir = `.data/fault-modes-${port}`;
const root = path.resolve(ROOT, dataDir);

/** Every directory and file from `dir` down, with its permission bits (links are not followed). */
async function modes(dir: string): Promise<{ path: string; dir: boolean; mode: number }[]> {
  const out: { path: string; dir: boolean; mode: number }[] = [];
  const pending = [dir];
  while (pending.length > 0) {
    const item = pending.pop()!;
    const info = await lstat(item).catch(() => null); // removed meanwhile (a temporary file)
    if (!info || (!info.isDirectory() && !info.isFile())) continue;
    out.push({ path: path.relative(ROOT, item), dir: info.isDirectory(), mode: info.mode & 0o777 });
    if (info.isDirectory()) for (const name of await readdir(item).catch(() => [])) pending.push(path.join(item, name));
  }
  return out;
}

/** The entries open to anyone but the owner, or not 0700 / 0600: none is expected. */
async function notPrivate(dir: string): Promise<string[]> {
  const all = await modes(dir);
  expect(all.filter((e) => !e.dir).length).toBeGreaterThan(100); // the database is there
  return all.filter((e) => e.mode !== (e.dir ? 0o700 : 0o600)).map((e) => `${e.path} ${e.mode.toString(8)}`);
}

async function charge(server: RunningServer, key: string) {
  const { apiToken } = await server.credentials();
  const res = await fetch(`${server.url}/api/v1/tools/payments.charge/invoke`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiToken}`, "content-type": "application/json", "idempotency-key": key },
    body: JSON.stringify({ customerId: "cus_modes", amountCents: 1999, currency: "EUR" }),
  });
  expect(res.status).toBe(200);
}

describe("the data directory's modes", () => {
  let server: RunningServer | null = null;
  afterAll(async () => {
    await server?.stop();
    await removeDataDir(dataDir);
  });

  it("a first start under umask 022 writes everything 0700 / 0600, while it runs and after it stops", async () => {
    await removeDataDir(dataDir);
    // a first start from nothing, as `npm start` does, not from the run's migrated copy
    useMigratedEmbeddedDatabase(undefined);
    server = await startServer({ port, dataDir, umask: 0o022 });
    expect(server.output()).not.toContain("open to other users");
    await charge(server, "modes-1");
    expect(await notPrivate(root)).toEqual([]);
    await server.stop();
    server = null;
    expect(await notPrivate(root)).toEqual([]);
  }, 300_000);

  it("an existing directory open to others is narrowed at start, with a line in the log", async () => {
    await server?.stop(); // left running by the test before when it failed
    server = null;
    for (const entry of await modes(root)) await chmod(path.resolve(ROOT, entry.path), entry.dir ? 0o755 : 0o666);
    server = await startServer({ port, dataDir, umask: 0o022 });
    expect(server.output()).toMatch(new RegExp(`the data directory ${dataDir} was open to other users: \\d+ modes narrowed to 0700 \\(directories\\) and 0600 \\(files\\)`));
    await charge(server, "modes-2");
    expect(await notPrivate(root)).toEqual([]);
  }, 300_000);
});
