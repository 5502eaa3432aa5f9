import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { handleInvoke } from "@/lib/gateway/fast-invoke";
import { startMcpGateway, type McpGateway } from "@/test/support/mcp-gateway";
import { FinalResultError, IdemgateApiError, IdemgateClient, type AttemptEvent, type IdemgateClientOptions } from "./index";

// The client's replay cache against the gateway's fast path in this process (PostgreSQL key store
// and audit log): which calls it answers without a request, which it leaves to the gateway, and the
// reports that put its replays in the audit log all the same.

let gateway: McpGateway;
let server: Server;
let token: string;
const SCOPE = "tenant-replay-cache";
const serverUrl = () => `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

beforeAll(async () => {
  gateway = await startMcpGateway("client_replay_cache");
  token = await gateway.token(SCOPE);
  server = createServer((req, res) => {
    if (!handleInvoke(req, res)) res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
});

afterAll(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  await gateway?.close();
});

/** A client, and the requests it sends for the tool (replay reports left out). */
function counted(options: Partial<IdemgateClientOptions> = {}): { client: IdemgateClient; requests: () => number; reports: () => number } {
  const attempts: AttemptEvent[] = [];
  const client = new IdemgateClient({ baseUrl: serverUrl(), token, retry: { baseDelayMs: 20, maxDelayMs: 100 }, onAttempt: (e) => attempts.push(e), ...options });
  return {
    client,
    requests: () => attempts.filter((a) => a.tool === "ledger.record").length,
    reports: () => attempts.filter((a) => a.tool !== "ledger.record").length,
  };
}

const entry = (memo: string) => ({ account: "acct-cache", amountCents: 990, currency: "EUR", memo });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function suppressions(key: string) {
  await gateway.runtime.audit.flush();
  return gateway.pg.db.prisma.suppression.findMany({ where: { key }, orderBy: { at: "asc" } });
}

async function report(bearer: string, body: unknown): Promise<Response> {
  return fetch(`${serverUrl()}/api/v1/replays`, {
    method: "POST",
    headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

describe("the client's replay cache", () => {
  it("answers a second guard() with the same key and arguments without a request: nothing runs, an equal object that is not the same one", async () => {
    const { client, requests } = counted();
    const key = `rc-${randomUUID()}`;
    let runs = 0;
    const first = await client.guard("ledger.record", entry("same"), async () => ({ entryId: `e-${++runs}`, lines: [1, 2] }), { key });
    const sent = requests();
    expect(sent).toBe(2); // reserve, complete
    const second = await client.guard("ledger.record", entry("same"), async () => ({ entryId: `e-${++runs}`, lines: [] as number[] }), { key });
    const third = await client.guard("ledger.record", entry("same"), async () => ({ entryId: `e-${++runs}`, lines: [] as number[] }), { key });
    expect(runs).toBe(1);
    expect(requests()).toBe(sent);
    expect(second).toEqual(first);
    expect(third).toEqual(first);
    expect(second).not.toBe(third);
    expect(second.lines).not.toBe(third.lines);
    await client.close();
  });

  it("keeps a replay the gateway answered too: the first replay is a request, the next ones are not", async () => {
    const key = `rc-${randomUUID()}`;
    await counted({ replayCache: false }).client.guard("ledger.record", entry("elsewhere"), async () => ({ ok: 1 }), { key });
    const { client, requests } = counted();
    expect(await client.guard("ledger.record", entry("elsewhere"), async () => ({ ok: 2 }), { key })).toEqual({ ok: 1 });
    expect(await client.guard("ledger.record", entry("elsewhere"), async () => ({ ok: 3 }), { key })).toEqual({ ok: 1 });
    expect(requests()).toBe(1);
    await client.close();
  });

  it("leaves other arguments, and the same arguments in another key order, to the gateway: a mismatch (422) surfaces as before", async () => {
    const { client, requests } = counted();
    const key = `rc-${randomUUID()}`;
    await client.guard("ledger.record", entry("args"), async () => ({ ok: true }), { key });
    const before = requests();
    const mismatch = await client.guard("ledger.record", entry("other args"), async () => ({ ok: false }), { key }).then(() => null, (err: unknown) => err);
    expect(mismatch).toBeInstanceOf(IdemgateApiError);
    expect((mismatch as IdemgateApiError).status).toBe(422);
    expect((mismatch as IdemgateApiError).code).toBe("mismatch");
    expect(requests()).toBe(before + 1);
    const reordered = { memo: "args", currency: "EUR", amountCents: 990, account: "acct-cache" };
    expect(await client.guard("ledger.record", reordered, async () => ({ ok: "ran" }), { key })).toEqual({ ok: true });
    expect(requests()).toBe(before + 2);
    await client.close();
  });

  it("keeps a final error: the next call throws FinalResultError without a request", async () => {
    const { client, requests } = counted();
    const key = `rc-${randomUUID()}`;
    const declined = Object.assign(new Error("card declined"), { status: 402, code: "card_declined" });
    await expect(client.guard("ledger.record", entry("declined"), async () => Promise.reject(declined), { key })).rejects.toBe(declined);
    const before = requests();
    const replay = await client.guard("ledger.record", entry("declined"), async () => ({ ran: true }), { key }).then(() => null, (err: unknown) => err);
    expect(replay).toBeInstanceOf(FinalResultError);
    expect((replay as FinalResultError).status).toBe(402);
    expect((replay as FinalResultError).body).toMatchObject({ error: { message: "card declined", code: "card_declined" } });
    expect(requests()).toBe(before);
    await client.close();
  });

  it("never serves an entry past the key's expiry by its own clock: the call goes to the gateway", async () => {
    let nowMs = 1_000;
    const { client, requests } = counted({ clock: () => nowMs });
    const key = `rc-${randomUUID()}`;
    await client.guard("ledger.record", entry("expiry"), async () => ({ n: 1 }), { key });
    const before = requests();
    nowMs += 60_000;
    await client.guard("ledger.record", entry("expiry"), async () => ({ n: 2 }), { key });
    expect(requests()).toBe(before);
    // the tool's TTL is 24 h (the default): the entry ends a margin (1%, at least 1 s) before it
    nowMs += 24 * 60 * 60 * 1000 - 60_000 - 14 * 60 * 1000;
    await client.guard("ledger.record", entry("expiry"), async () => ({ n: 3 }), { key });
    expect(requests()).toBe(before + 1);
    await client.close();
  });

  it("an aborted call throws the abort reason, as its request would have, even when the answer is cached", async () => {
    const { client, requests } = counted();
    const key = `rc-${randomUUID()}`;
    await client.guard("ledger.record", entry("abort"), async () => ({ a: 1 }), { key });
    const before = requests();
    const reason = new Error("the caller gave up");
    const controller = new AbortController();
    controller.abort(reason);
    await expect(client.guard("ledger.record", entry("abort"), async () => ({ a: 2 }), { key, signal: controller.signal })).rejects.toBe(reason);
    expect(requests()).toBe(before);
    await client.close();
  });

  it("replayCache: false sends every replay to the gateway", async () => {
    const { client, requests } = counted({ replayCache: false });
    const key = `rc-${randomUUID()}`;
    for (let i = 0; i < 3; i++) await client.guard("ledger.record", entry("off"), async () => ({ once: true }), { key });
    expect(requests()).toBe(2 + 2);
  });

  it("keeps at most maxEntries answers, the least recently used out first", async () => {
    const { client, requests } = counted({ replayCache: { maxEntries: 2 } });
    const keys = [0, 1, 2].map(() => `rc-${randomUUID()}`);
    for (const key of keys) await client.guard("ledger.record", entry("lru"), async () => ({ key }), { key });
    const before = requests();
    await client.guard("ledger.record", entry("lru"), async () => null, { key: keys[2] });
    await client.guard("ledger.record", entry("lru"), async () => null, { key: keys[1] });
    expect(requests()).toBe(before);
    expect(await client.guard("ledger.record", entry("lru"), async () => null, { key: keys[0] })).toEqual({ key: keys[0] });
    expect(requests()).toBe(before + 1);
    await client.close();
  });
});

describe("replays answered from the cache in the audit log", () => {
  it("are recorded after flush() as replay suppressions with the key, the session, the caller and the gap at the hit", async () => {
    const { client, reports } = counted();
    const key = `rc-${randomUUID()}`;
    const started = Date.now();
    await client.guard("ledger.record", entry("audit"), async () => ({ audited: true }), { key, session: "run-1" });
    await sleep(300);
    await client.guard("ledger.record", entry("audit"), async () => ({ audited: false }), { key, session: "run-2" });
    const hitAfterMs = Date.now() - started;
    // the report goes out at least 250 ms after the hit: the gap recorded is the hit's, not the report's
    await client.flush();
    expect(reports()).toBe(1);
    const rows = await suppressions(key);
    const execution = await gateway.pg.db.prisma.execution.findFirstOrThrow({ where: { key } });
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ scope: SCOPE, tool: "ledger.record", kind: "replay", session: "run-2", originalSession: "run-1", originalExecutionId: execution.id, transport: "http" });
    expect(rows[0].caller).toBeTruthy();
    expect(rows[0].gapMs).toBeGreaterThanOrEqual(250);
    expect(rows[0].gapMs).toBeLessThanOrEqual(hitAfterMs + 100);
    expect(client.droppedReplayReports).toBe(0);
  });

  it("go out on their own, in the background, without flush()", async () => {
    const { client, reports } = counted();
    const key = `rc-${randomUUID()}`;
    await client.guard("ledger.record", entry("timer"), async () => ({ t: 1 }), { key });
    for (let i = 0; i < 3; i++) await client.guard("ledger.record", entry("timer"), async () => ({ t: 2 }), { key });
    await expect.poll(reports, { timeout: 5_000 }).toBe(1);
    await expect.poll(async () => (await suppressions(key)).length, { timeout: 5_000 }).toBe(3);
  });

  it("are ignored for another scope's key or another execution, and a malformed report is a 400 that records nothing", async () => {
    const key = `rc-${randomUUID()}`;
    await counted().client.guard("ledger.record", entry("foreign"), async () => ({ f: 1 }), { key });
    const execution = await gateway.pg.db.prisma.execution.findFirstOrThrow({ where: { key } });
    const other = await gateway.token("tenant-other");
    const foreign = await report(other, { replays: [{ tool: "ledger.record", key, executionId: execution.id, ageMs: 0 }] });
    expect(foreign.status).toBe(200);
    expect(await foreign.json()).toEqual({ recorded: 0, ignored: 1 });
    const wrong = await report(token, {
      replays: [
        { tool: "ledger.record", key, executionId: randomUUID(), ageMs: 0 },
        { tool: "other.tool", key, executionId: execution.id, ageMs: 0 },
        { tool: "ledger.record", key: `rc-${randomUUID()}`, executionId: execution.id, ageMs: 0 },
      ],
    });
    expect(await wrong.json()).toEqual({ recorded: 0, ignored: 3 });
    for (const body of [
      { replays: [{ tool: "ledger.record", key, executionId: execution.id, ageMs: -1 }] },
      { replays: [{ tool: "ledger.record", key, executionId: execution.id }] },
      { replays: [{ tool: "ledger.record", key, executionId: execution.id, ageMs: 0, extra: 1 }] },
      { replays: [{ tool: "ledger.record", key, executionId: execution.id, ageMs: 0 }], more: true },
      { replays: Array.from({ length: 501 }, () => ({ tool: "ledger.record", key, executionId: execution.id, ageMs: 0 })) },
      "not an object",
    ]) {
      const bad = await report(token, body);
      expect(bad.status).toBe(400);
      expect(bad.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    }
    expect(await suppressions(key)).toHaveLength(0);
    const ok = await report(token, { replays: [{ tool: "ledger.record", key, executionId: execution.id, ageMs: 0, session: "s-direct" }] });
    expect(await ok.json()).toEqual({ recorded: 1, ignored: 0 });
    expect(await suppressions(key)).toMatchObject([{ kind: "replay", session: "s-direct" }]);
  });

  it("a report that cannot be delivered is tried three times, then dropped and counted", async () => {
    let tries = 0;
    const failing: typeof fetch = async (input, init) => {
      if (String(input).endsWith("/api/v1/replays")) {
        tries++;
        throw new TypeError("fetch failed");
      }
      return fetch(input, init);
    };
    const { client } = counted({ fetch: failing });
    const key = `rc-${randomUUID()}`;
    await client.guard("ledger.record", entry("dropped"), async () => ({ d: 1 }), { key });
    await client.guard("ledger.record", entry("dropped"), async () => ({ d: 2 }), { key });
    await client.guard("ledger.record", entry("dropped"), async () => ({ d: 3 }), { key });
    await client.flush();
    expect(tries).toBe(3);
    expect(client.droppedReplayReports).toBe(2);
    expect(await suppressions(key)).toHaveLength(0);
  });

  it("refuses a report without a valid token", async () => {
    expect((await report("idg_not-a-token", { replays: [] })).status).toBe(401);
  });
});
