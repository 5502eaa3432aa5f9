import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { handleInvoke } from "@/lib/gateway/fast-invoke";
import { startMcpGateway, type McpGateway } from "@/test/support/mcp-gateway";
import { FinalResultError, IdemgateClient, NotAppliedError, OutcomeUnknownError, type GuardWarning } from "./index";

// guard() over real HTTP against the gateway's fast path in this process (PostgreSQL key store and
// audit log): the four outcomes, an operator's release while the function runs, and the packed
// package installed offline into an empty project. test/faults/guard.test.ts runs the same against
// production servers on both configurations.

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, "../..");
let gateway: McpGateway;
let server: Server;
let token: string;
let client: IdemgateClient;
const serverUrl = () => `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

beforeAll(async () => {
  gateway = await startMcpGateway("client_guard");
  token = await gateway.token("tenant-guard");
  server = createServer((req, res) => {
    if (!handleInvoke(req, res)) res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  client = new IdemgateClient({ baseUrl: serverUrl(), token, retry: { baseDelayMs: 20, maxDelayMs: 100 } });
});

afterAll(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  await gateway?.close();
});

describe("guard()", () => {
  const entry = (memo: string) => ({ account: "acct-guard", amountCents: 1250, currency: "EUR", memo });

  it("runs once and replays the stored result to every retry without running", async () => {
    const ledger: string[] = [];
    const key = `g-${randomUUID()}`;
    const record = async () => {
      ledger.push(key);
      return { entryId: `e-${ledger.length}` };
    };
    const results = [];
    for (let i = 0; i < 5; i++) results.push(await client.guard("ledger.record", entry("once"), record, { key }));
    expect(results).toEqual(Array(5).fill({ entryId: "e-1" }));
    expect(ledger).toHaveLength(1);
    // idempotent(): the key made from the arguments
    const charge = client.idempotent("ledger.record", async (args: { account: string; amountCents: number; currency: string; memo: string }) => record(), {
      key: (args) => `order-${args.memo}-${key}`,
    });
    const a = await charge(entry("o-1"));
    expect(await charge(entry("o-1"))).toEqual(a);
    expect(ledger).toHaveLength(2);
  });

  it("fn throws after its effect: unknown (OutcomeUnknownError), and no retry runs it again", async () => {
    const ledger: string[] = [];
    const key = `g-${randomUUID()}`;
    const failing = async () => {
      ledger.push(key);
      throw new Error("the SDK's connection reset after sending");
    };
    await expect(client.guard("ledger.record", entry("unknown"), failing, { key })).rejects.toBeInstanceOf(OutcomeUnknownError);
    for (let i = 0; i < 3; i++) {
      await expect(client.guard("ledger.record", entry("unknown"), failing, { key })).rejects.toBeInstanceOf(OutcomeUnknownError);
    }
    expect(ledger).toHaveLength(1);
  });

  it("fn throws NotAppliedError: released, and the retry runs once", async () => {
    const ledger: string[] = [];
    const key = `g-${randomUUID()}`;
    let attempt = 0;
    const flaky = async () => {
      if (attempt++ === 0) throw new NotAppliedError("the SDK refused before sending");
      ledger.push(key);
      return { entryId: "e-after-retry" };
    };
    await expect(client.guard("ledger.record", entry("not-applied"), flaky, { key })).rejects.toBeInstanceOf(NotAppliedError);
    expect(await client.guard("ledger.record", entry("not-applied"), flaky, { key })).toEqual({ entryId: "e-after-retry" });
    expect(await client.guard("ledger.record", entry("not-applied"), flaky, { key })).toEqual({ entryId: "e-after-retry" });
    expect(ledger).toHaveLength(1);
  });

  it("an error with a 4xx status is the stored result: rethrown, then replayed as FinalResultError without running", async () => {
    const ledger: string[] = [];
    const key = `g-${randomUUID()}`;
    const declined = async () => {
      ledger.push(key);
      throw Object.assign(new Error("card declined"), { status: 402 });
    };
    await expect(client.guard("ledger.record", entry("declined"), declined, { key })).rejects.toThrow("card declined");
    const replay = await client.guard("ledger.record", entry("declined"), declined, { key }).catch((e) => e);
    expect(replay).toBeInstanceOf(FinalResultError);
    expect(replay).toMatchObject({ status: 402, body: { error: { message: "card declined" } } });
    expect(ledger).toHaveLength(1);
  });

  it("an operator's release while the function runs: heartbeats refused and said so, the completion kept as a late one, the value returned", async () => {
    const key = `g-${randomUUID()}`;
    const warnings: GuardWarning[] = [];
    const short = new IdemgateClient({ baseUrl: serverUrl(), token });
    const value = await short.guard(
      "ledger.record",
      entry("released"),
      async () => {
        await gateway.runtime.engine.release({ scope: "tenant-guard", key, actor: "op", reason: "believed not to have happened", force: true });
        // the next heartbeat comes a third of the 60 s lease later; ask for one now as the timer would
        const row = await gateway.pg.db.prisma.execution.findFirst({ where: { key } });
        const res = await fetch(`${serverUrl()}/api/v1/executions/${row!.id}/heartbeat`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: JSON.stringify({ token: Number(row!.token) }),
        });
        expect(res.status).toBe(409);
        return { entryId: "late" };
      },
      { key, onWarning: (w) => warnings.push(w) },
    );
    expect(value).toEqual({ entryId: "late" });
    expect(warnings.map((w) => w.kind)).toEqual(["late_completion"]);
    await gateway.runtime.audit.flush();
    expect(await gateway.pg.db.prisma.execution.findFirst({ where: { key } })).toMatchObject({ outcome: "late_completion", resultBody: '{"entryId":"late"}' });
  });

  it("the packed client installs offline into an empty project on Node and guards a function there", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "idemgate-client-"));
    try {
      const clientDir = path.join(ROOT, "lib", "client");
      const { stdout } = await run("npm", ["pack", "--silent", "--pack-destination", dir], { cwd: clientDir });
      const tarball = path.join(dir, stdout.trim().split("\n").at(-1)!);
      const project = path.join(dir, "app");
      await run("mkdir", ["-p", project]);
      await writeFile(path.join(project, "package.json"), JSON.stringify({ name: "guarded-app", version: "1.0.0", type: "module", private: true }));
      await run("npm", ["install", "--offline", "--no-audit", "--no-fund", tarball], { cwd: project });
      expect(await readdir(path.join(project, "node_modules", "@idemgate", "client", "dist"))).toEqual(expect.arrayContaining(["index.js", "index.d.ts"]));
      const key = `pkg-${randomUUID()}`;
      await writeFile(
        path.join(project, "main.mjs"),
        `import { IdemgateClient } from "@idemgate/client";
const client = new IdemgateClient({ baseUrl: process.env.URL, token: process.env.TOKEN });
let effects = 0;
const args = { account: "acct-pkg", amountCents: 10, currency: "EUR" };
const first = await client.guard("ledger.record", args, async () => ({ entryId: "pkg-" + ++effects }), { key: process.env.KEY });
const again = await client.guard("ledger.record", args, async () => ({ entryId: "pkg-" + ++effects }), { key: process.env.KEY });
console.log(JSON.stringify({ first, again, effects }));
`,
      );
      const out = await run(process.execPath, ["main.mjs"], { cwd: project, env: { ...process.env, URL: serverUrl(), TOKEN: token, KEY: key } });
      expect(JSON.parse(out.stdout.trim())).toEqual({ first: { entryId: "pkg-1" }, again: { entryId: "pkg-1" }, effects: 1 });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 240_000);
});
