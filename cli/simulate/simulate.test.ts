import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { countPurposes, formatSummary, planHorizonMs, planSimulation, Random, runSimulation, simulationTarget, SimulationTargetError, type PlanOptions, type PlannedCall } from ".";

const BASE: PlanOptions = { runId: "r1", seed: 42, agents: 6, durationMs: 60_000, maxCalls: 5_000, genuineRepeats: true, faults: true, clientTimeoutMs: 800 };

function allCalls(options: PlanOptions): PlannedCall[] {
  return planSimulation(options).flatMap((p) => p.calls);
}

const latencyOf = (c: PlannedCall) => (c.args.simulate as { latencyMs?: number } | undefined)?.latencyMs ?? 0;
const outcomeOf = (c: PlannedCall) => (c.args.simulate as { outcome?: string } | undefined)?.outcome;

describe("Random", () => {
  it("is deterministic per seed and stays in range", () => {
    const a = new Random(7);
    const b = new Random(7);
    const xs = Array.from({ length: 200 }, () => a.next());
    expect(xs).toEqual(Array.from({ length: 200 }, () => b.next()));
    expect(xs.every((x) => x >= 0 && x < 1)).toBe(true);
    const r = new Random(1);
    for (let i = 0; i < 500; i++) {
      const n = r.int(3, 5);
      expect(n).toBeGreaterThanOrEqual(3);
      expect(n).toBeLessThanOrEqual(5);
    }
    expect(new Random(8).next()).not.toBe(new Random(7).next());
  });
});

describe("planSimulation", () => {
  it("plans the same traffic for the same seed, and other traffic for another", () => {
    expect(planSimulation(BASE)).toEqual(planSimulation(BASE));
    expect(allCalls({ ...BASE, seed: 43 })).not.toEqual(allCalls(BASE));
    // the runId only names things: the shape is the seed's
    const shape = (o: PlanOptions) => allCalls(o).map((c) => [c.agent, c.atMs, c.tool, c.purpose]);
    expect(shape({ ...BASE, runId: "other" })).toEqual(shape(BASE));
  });

  it("stays inside the duration and the call budget, one plan per agent, in time order", () => {
    const plans = planSimulation(BASE);
    expect(plans.map((p) => p.agent)).toEqual([0, 1, 2, 3, 4, 5]);
    for (const plan of plans) {
      expect(plan.calls.every((c) => c.agent === plan.agent && c.atMs >= 0 && c.atMs <= planHorizonMs(BASE.durationMs))).toBe(true);
      expect(plan.calls.map((c) => c.atMs)).toEqual([...plan.calls.map((c) => c.atMs)].sort((x, y) => x - y));
    }
    const small = allCalls({ ...BASE, maxCalls: 30 });
    expect(small.length).toBeLessThanOrEqual(30);
    expect(small.length).toBeGreaterThan(0);
    const short = allCalls({ ...BASE, durationMs: 2_000 });
    expect(short.every((c) => c.atMs <= 1_900)).toBe(true);
  });

  it("names keys and sessions by run, agent and conversation; valid gateway keys", () => {
    const calls = allCalls(BASE);
    for (const c of calls) {
      expect(c.session).toMatch(new RegExp(`^sim-r1-a${c.agent}-c\\d+$`));
      if (c.key !== null) {
        expect(c.key.startsWith(`sim-r1-a${c.agent}-`)).toBe(true);
        expect(c.key).toMatch(/^[\x21-\x7e]{1,255}$/);
      }
    }
    // one key per logical action: two originals never share a key
    const originals = calls.filter((c) => c.repeats === undefined && c.key !== null);
    expect(new Set(originals.map((c) => c.key)).size).toBe(originals.length);
  });

  it("reads and fallback calls carry no key; every other write does", () => {
    for (const c of allCalls(BASE)) {
      if (c.purpose === "read") expect(c.tool).toMatch(/\.(list_charges|get_balance|list_outbox|list)$/);
      if (c.purpose === "read" || c.purpose === "keyless" || c.purpose === "genuine_repeat_fallback") expect(c.key).toBeNull();
      else expect(c.key).not.toBeNull();
      if (c.key === null && c.purpose !== "read") expect(c.tool).toBe("tickets.create");
    }
  });

  it("follow-ups repeat their original: same args, the right key, after the right gap", () => {
    for (const plan of planSimulation(BASE)) {
      const bySeq = new Map(plan.calls.map((c) => [c.seq, c]));
      for (const c of plan.calls.filter((x) => x.repeats !== undefined)) {
        const original = bySeq.get(c.repeats!)!;
        expect(original).toBeDefined();
        expect(c.tool).toBe(original.tool);
        expect(c.atMs).toBeGreaterThanOrEqual(original.atMs);
        const gap = c.atMs - original.atMs;
        switch (c.purpose) {
          case "framework_retry":
            expect(c.key).toBe(original.key);
            expect(c.args).toEqual(original.args);
            expect(gap).toBeLessThanOrEqual(50);
            break;
          case "reemission":
            expect(c.key).toBe(original.key);
            expect(c.args).toEqual(original.args);
            expect(gap).toBeGreaterThanOrEqual(2_000);
            break;
          case "fresh_key_duplicate":
            expect(c.key).not.toBe(original.key);
            expect(c.args).toEqual(original.args);
            break;
          case "genuine_repeat_fallback":
            expect(c.key).toBeNull();
            expect(c.args).toEqual(original.args);
            // long after any retry, but inside the 60 s fallback-dedupe window, so it is swallowed
            expect(gap).toBeGreaterThanOrEqual(10_000);
            expect(gap).toBeLessThan(60_000);
            break;
          case "genuine_repeat_reused_key":
            expect(original.purpose).toBe("conversation_key");
            expect(c.key).toBe(original.key);
            expect(c.session).toBe(original.session);
            expect(c.args).toEqual(original.args);
            expect(gap).toBeGreaterThanOrEqual(10_000);
            break;
          case "reused_key_other_args":
            expect(original.purpose).toBe("conversation_key");
            expect(c.key).toBe(original.key);
            expect(c.args).not.toEqual(original.args);
            break;
          default:
            throw new Error(`unexpected follow-up purpose ${c.purpose}`);
        }
      }
    }
  });

  it("slow calls outlast the client's timeout; the others do not", () => {
    const calls = allCalls(BASE);
    const slow = calls.filter((c) => c.purpose === "slow_action");
    expect(slow.length).toBeGreaterThan(0);
    expect(slow.every((c) => latencyOf(c) > BASE.clientTimeoutMs)).toBe(true);
    const fast = calls.filter((c) => c.purpose !== "slow_action" && c.purpose !== "read");
    expect(fast.every((c) => latencyOf(c) < BASE.clientTimeoutMs)).toBe(true);
  });

  it("gives every action arguments of its own: only follow-ups repeat an earlier call's", () => {
    for (const plan of planSimulation(BASE)) {
      const originals = plan.calls.filter((c) => c.repeats === undefined && c.purpose !== "read");
      const fingerprints = originals.map((c) => `${c.tool} ${JSON.stringify(c.args)} ${c.chargeFrom ?? ""}`);
      expect(new Set(fingerprints).size).toBe(fingerprints.length);
    }
  });

  it("refunds refer to an earlier charge of the same agent, each charge once", () => {
    for (const plan of planSimulation(BASE)) {
      const refunded = plan.calls.filter((x) => x.tool === "payments.refund").map((x) => x.chargeFrom);
      expect(new Set(refunded).size).toBe(refunded.length);
      for (const c of plan.calls.filter((x) => x.tool === "payments.refund")) {
        const charge = plan.calls.find((x) => x.seq === c.chargeFrom);
        expect(charge?.tool).toBe("payments.charge");
        expect(charge!.atMs).toBeLessThanOrEqual(c.atMs);
      }
    }
  });

  it("faults and genuine repeats only when asked for", () => {
    const all = countPurposes(planSimulation(BASE));
    for (const p of ["decline", "tool_error", "unknown_outcome", "crash", "genuine_repeat_fallback", "genuine_repeat_reused_key", "reused_key_other_args", "framework_retry", "reemission", "fresh_key_duplicate", "read"] as const) {
      expect(all[p], p).toBeGreaterThan(0);
    }
    const outcomes = allCalls(BASE).map(outcomeOf);
    expect(outcomes).toContain("crash_after_effect");
    expect(outcomes).toContain("throw_after_effect");
    expect(outcomes).toContain("decline");
    expect(outcomes).toContain("error");

    const plain = planSimulation({ ...BASE, faults: false, genuineRepeats: false });
    const counts = countPurposes(plain);
    for (const p of ["decline", "tool_error", "unknown_outcome", "crash", "genuine_repeat_fallback", "genuine_repeat_reused_key", "reused_key_other_args", "conversation_key"] as const) {
      expect(counts[p], p).toBe(0);
    }
    expect(plain.flatMap((p) => p.calls).every((c) => outcomeOf(c) === undefined)).toBe(true);
    expect(counts.fresh_key_duplicate).toBeGreaterThan(0);
    expect(countPurposes(planSimulation({ ...BASE, freshKeyDuplicates: false })).fresh_key_duplicate).toBe(0);
  });
});

describe("simulationTarget", () => {
  it("allows loopback addresses and listed origins only", () => {
    expect(simulationTarget("http://127.0.0.1:3000/some/path")).toBe("http://127.0.0.1:3000");
    expect(simulationTarget("http://localhost:3000")).toBe("http://localhost:3000");
    expect(simulationTarget("http://[::1]:3000")).toBe("http://[::1]:3000");
    expect(simulationTarget("https://idemgate.internal:8443", ["https://idemgate.internal:8443/"])).toBe("https://idemgate.internal:8443");
    expect(() => simulationTarget("https://example.com")).toThrow(SimulationTargetError);
    expect(() => simulationTarget("http://10.0.0.5:3000")).toThrow(/loopback/);
    expect(() => simulationTarget("ftp://127.0.0.1")).toThrow(/http or https/);
    expect(() => simulationTarget("nope")).toThrow(/not a URL/);
  });
});

/**
 * A stand-in gateway with the contract's observable behaviour (reserve, replay, 409 while running,
 * 422 on other args, keyless fallback for tickets.create, the simulate knobs), so the runner's
 * counting is checked without a database. The real server is exercised by the e2e tests.
 */
function fakeGateway() {
  const records = new Map<string, { fp: string; state: "inflight" | "done"; status?: number; body?: string }>();
  const effects: Record<string, number> = {};
  let requests = 0;
  const tools = [
    ["payments.charge", "write"],
    ["payments.refund", "write"],
    ["payments.list_charges", "read"],
    ["payments.get_balance", "read"],
    ["email.send", "write"],
    ["email.list_outbox", "read"],
    ["tickets.create", "write"],
    ["tickets.list", "read"],
  ] as const;
  const send = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { "Content-Type": "application/json", ...headers });
    res.end(typeof body === "string" ? body : JSON.stringify(body));
  };
  const problem = (res: ServerResponse, status: number, code: string, headers: Record<string, string> = {}) => {
    res.writeHead(status, { "Content-Type": "application/problem+json", ...headers });
    res.end(JSON.stringify({ type: `/problems/${code}`, title: code, status, detail: code }));
  };
  const server = createServer((req, res) => {
    let raw = "";
    req.on("data", (c) => (raw += c));
    req.on("end", async () => {
      requests++;
      if (req.headers.authorization !== "Bearer idg_sim") return problem(res, 401, "unauthorized");
      if (req.method === "GET") return send(res, 200, { tools: tools.map(([name, kind]) => ({ name, kind })) });
      const tool = decodeURIComponent(/^\/api\/v1\/tools\/([^/]+)\/invoke$/.exec(req.url ?? "")?.[1] ?? "");
      const kind = tools.find(([name]) => name === tool)?.[1];
      if (!kind) return problem(res, 404, "unknown_tool");
      if (kind === "read") return send(res, 200, {});
      const args = JSON.parse(raw) as { simulate?: { latencyMs?: number; outcome?: string } };
      const fp = tool + raw;
      const key = (req.headers["idempotency-key"] as string | undefined) ?? (tool === "tickets.create" ? `fallback:${fp}` : null);
      if (key === null) return problem(res, 400, "missing_key");
      const existing = records.get(key);
      if (existing) {
        if (existing.fp !== fp) return problem(res, 422, "mismatch");
        if (existing.state === "inflight") return problem(res, 409, "conflict", { "Retry-After": "60" });
        return send(res, existing.status!, existing.body!, { "Idempotent-Replayed": "true", "Idempotency-Key": key });
      }
      const record: { fp: string; state: "inflight" | "done"; status?: number; body?: string } = { fp, state: "inflight" };
      records.set(key, record);
      await new Promise((r) => setTimeout(r, args.simulate?.latencyMs ?? 0));
      const outcome = args.simulate?.outcome ?? "ok";
      if (outcome === "error") {
        records.delete(key);
        return problem(res, 502, "tool_failed");
      }
      if (outcome === "decline") {
        Object.assign(record, { state: "done", status: 402, body: JSON.stringify({ code: "declined" }) });
        return send(res, 402, record.body!, { "Idempotency-Key": key, "Idemgate-Execution-Id": "x" });
      }
      effects[tool] = (effects[tool] ?? 0) + 1;
      if (outcome === "crash_after_effect") return problem(res, 500, "abandoned");
      if (outcome === "throw_after_effect") {
        record.state = "done";
        Object.assign(record, { status: 409, body: JSON.stringify({ type: "/problems/outcome_unknown", title: "outcome_unknown", status: 409 }) });
        return problem(res, 502, "outcome_unknown");
      }
      const body = JSON.stringify(tool === "payments.charge" ? { chargeId: `ch_${effects[tool]}` } : { id: effects[tool] });
      Object.assign(record, { state: "done", status: 200, body });
      return send(res, 200, body, { "Idempotency-Key": key, "Idemgate-Execution-Id": "x" });
    });
  });
  return { server, effects, records, requests: () => requests };
}

describe("runSimulation against a stand-in gateway", () => {
  const fake = fakeGateway();
  let url = "";

  beforeAll(async () => {
    await new Promise<void>((resolve) => fake.server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(fake.server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    fake.server.closeAllConnections();
    await new Promise((resolve) => fake.server.close(resolve));
  });

  it("stops by itself and counts what came back", async () => {
    const started = Date.now();
    const summary = await runSimulation({ url, token: "idg_sim", agents: 4, durationMs: 5_000, seed: 42, faults: true, genuineRepeats: true, runId: "t1" });
    expect(Date.now() - started).toBeLessThan(5_000 + 8_000);
    expect(["plan_done", "duration"]).toContain(summary.stoppedBy);

    // every HTTP request the server saw (the tool list included) is counted once
    expect(summary.totals.requests + 1).toBe(fake.requests());
    const t = summary.totals;
    expect(t.calls).toBeGreaterThan(20);
    expect(t.calls).toBe(Object.values(summary.purposes).reduce((a, b) => a + (b ?? 0), 0));
    // every call ends exactly one way
    expect(t.executed + t.replayed + t.reads + t.mismatches + t.unknown + t.failed).toBe(t.calls);
    // an unknown outcome is final: one request, counted once, its key listed
    expect(summary.caused.unknownOutcomes).toBeGreaterThan(0);
    expect(t.unknown).toBe(summary.caused.unknownOutcomes);
    expect(summary.caused.unknownOutcomeKeys).toHaveLength(summary.caused.unknownOutcomes);

    // slow tools: the client timed out and retried into 409s while the first call ran
    if (summary.caused.slowCalls > 0) {
      expect(t.timeouts).toBeGreaterThanOrEqual(summary.caused.slowCalls);
      expect(t.conflicts).toBeGreaterThan(0);
    }
    // framework retries and re-emissions are replays, never second side effects
    expect(t.replayed).toBeGreaterThanOrEqual(summary.caused.frameworkRetries);
    // crashes leave their keys inflight in the store: those are the keys that will be stuck
    const inflight = [...fake.records.entries()].filter(([, r]) => r.state === "inflight").map(([k]) => k);
    expect(summary.caused.expectedStuckKeys).toEqual(inflight.sort());
    expect(summary.caused.expectedStuckKeys.length).toBe(summary.caused.crashes);
    expect(t.crashes).toBeGreaterThanOrEqual(summary.caused.crashes);
    expect(t.errors).toBeGreaterThanOrEqual(summary.caused.toolErrors);

    const text = formatSummary(summary);
    expect(text).toMatch(/^Simulation t1 against http:\/\/127\.0\.0\.1:\d+: 4 agents/);
    expect(text).toMatch(/payments\.charge/);
    expect(text).toMatch(/^total/m);
    expect(text).toMatch(/crashes after the side effect: +\d+ +-> \d+ keys stuck/);
    expect(text).toMatch(/unknown outcomes \(tool threw after its effect\): +\d+ +-> \d+ keys held as unknown/);

    // this stand-in has no arguments window: every fresh-key duplicate ran again, and nothing checked them
    const f = summary.freshKeys;
    expect(f.caused).toBe(summary.caused.freshKeyDuplicates);
    expect(f.caused).toBeGreaterThan(0);
    expect(f).toMatchObject({ suppressed: 0, ran: f.caused, flagged: null, caught: null, modelKeys: false });
    expect(f.sent.every((d) => d.originalKey !== null && d.originalKey !== d.key && d.executionId === "x")).toBe(true);
    expect(text).toMatch(new RegExp(`fresh-key duplicates \\(caller bug\\): +${f.caused} +-> 0 suppressed as fresh_key, ${f.caused} ran twice`));
    expect(text).toMatch(new RegExp(`Fresh-key duplicates: caught \\? of ${f.caused} caused\\.`));
  }, 30_000);

  it("counts fresh-key duplicates caught: those the check says were flagged, and the ones it missed", async () => {
    let asked: string[] = [];
    const summary = await runSimulation({
      url,
      token: "idg_sim",
      agents: 3,
      durationMs: 3_000,
      seed: 100,
      runId: "t3",
      checkFreshKeys: async (ran) => {
        asked = ran.map((d) => d.key);
        return asked.slice(1); // the first one "missed"
      },
    });
    const f = summary.freshKeys;
    expect(f.ran).toBeGreaterThan(0);
    expect(asked).toHaveLength(f.ran);
    expect(f).toMatchObject({ flagged: f.ran - 1, caught: f.ran - 1, missed: [asked[0]] });
    expect(formatSummary(summary)).toMatch(new RegExp(`caught ${f.ran - 1} of ${f.caused} caused[\\s\\S]*ran and not flagged: ${asked[0]}`));

    const none = await runSimulation({ url, token: "idg_sim", agents: 3, durationMs: 3_000, seed: 99, runId: "t4", freshKeyDuplicates: false, checkFreshKeys: async () => { throw new Error("never asked"); } });
    expect(none.freshKeys).toMatchObject({ caused: 0, ran: 0, caught: 0, flagged: 0 });
  }, 30_000);

  it("stops at the request limit", async () => {
    const summary = await runSimulation({ url, token: "idg_sim", agents: 3, durationMs: 10_000, seed: 5, maxRequests: 15, runId: "t2" });
    expect(summary.stoppedBy).toBe("max_requests");
    // calls already running finish (with their retries); no new ones start
    expect(summary.totals.requests).toBeLessThan(15 + 3 * 6);
    expect(summary.skipped).toBeGreaterThan(0);
  });

  it("refuses a bad token, a remote URL and a server without the demo tools, readably", async () => {
    await expect(runSimulation({ url, token: "idg_wrong", durationMs: 1_000 })).rejects.toThrow(/refused the token/);
    await expect(runSimulation({ url: "https://example.com", token: "idg_sim", durationMs: 1_000 })).rejects.toThrow(SimulationTargetError);
    const bare = createServer((_req, res) => {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ tools: [] }));
    });
    await new Promise<void>((resolve) => bare.listen(0, "127.0.0.1", resolve));
    try {
      const port = (bare.address() as AddressInfo).port;
      await expect(runSimulation({ url: `http://127.0.0.1:${port}`, token: "idg_sim", durationMs: 1_000 })).rejects.toThrow(/lacks the demo tools payments\.charge/);
    } finally {
      bare.closeAllConnections();
      await new Promise((resolve) => bare.close(resolve));
    }
  });
});
