import { execFile } from "node:child_process";
import { request } from "node:http";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testPort } from "@/scripts/test-ports.mjs";
import { startBearerProxy, type BearerProxy } from "@/test/support/bearer-proxy";
import { ROOT, removeDataDir, startServer, type RunningServer } from "@/test/support/server";

// The official MCP conformance suite (@modelcontextprotocol/conformance, a devDependency) against
// /mcp of one production server on the embedded database, every server scenario of its active suite
// in one process. The suite sends no token, so it talks to a test-only proxy that adds the server's
// API token to every request. The suite needs Node 22 (it imports fs.globSync): it runs on the
// `node` package from the npm registry through npx, whatever Node runs the tests.
// The suite's own verdict (its --expected-failures baseline) and this file's both fail the test when
// a scenario that should pass fails, and when an expected failure starts passing: the list stays true.
// Port 3184 is this file's (moved by IDEMGATE_TEST_PORT_BASE).

const NODE_22 = "node@22.23.3";
const SUITE = path.join(ROOT, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js");

/**
 * The scenarios Idemgate fails, each with the reason. Most exercise the suite's reference server:
 * its fixture tools (test_simple_text, test_image_content, …), resources, prompts, completions and
 * logging, none of which a gateway of its users' own tools has.
 */
const EXPECTED_FAILURES: Record<string, string> = {
  "logging-set-level": "Idemgate offers no logging capability (logging/setLevel is -32601)",
  "completion-complete": "Idemgate offers no completions (it has no prompts or resource templates to complete)",
  "tools-call-simple-text": "needs the suite's fixture tool test_simple_text",
  "tools-call-image": "needs the suite's fixture tool test_image_content",
  "tools-call-audio": "needs the suite's fixture tool test_audio_content",
  "tools-call-embedded-resource": "needs the suite's fixture tool test_embedded_resource",
  "tools-call-mixed-content": "needs the suite's fixture tool test_multiple_content_types",
  "tools-call-with-logging": "needs the suite's fixture tool test_tool_with_logging and the logging capability",
  "tools-call-error": "needs the suite's fixture tool test_error_handling",
  "tools-call-with-progress": "needs the suite's fixture tool test_tool_with_progress",
  "tools-call-sampling": "needs the suite's fixture tool test_sampling (and a server that asks the client to sample)",
  "tools-call-elicitation": "needs the suite's fixture tool test_elicitation (and a server that asks the client for input)",
  "elicitation-sep1034-defaults": "needs the suite's fixture tool test_elicitation_sep1034_defaults",
  "elicitation-sep1330-enums": "needs the suite's fixture tool test_elicitation_sep1330_enums",
  "resources-list": "Idemgate offers no resources (resources/list is -32601); the scenario expects the suite's fixture resources",
  "resources-read-text": "no resources: needs the suite's fixture resource test://static-text",
  "resources-read-binary": "no resources: needs the suite's fixture resource test://static-binary",
  "resources-templates-read": "no resources: needs the suite's fixture resource template",
  "resources-subscribe": "no resources to subscribe to",
  "resources-unsubscribe": "no resources to subscribe to",
  "prompts-list": "Idemgate offers no prompts (prompts/list is -32601); the scenario expects the suite's fixture prompts",
  "prompts-get-simple": "no prompts: needs the suite's fixture prompt test_simple_prompt",
  "prompts-get-with-args": "no prompts: needs the suite's fixture prompt test_prompt_with_arguments",
  "prompts-get-embedded-resource": "no prompts: needs the suite's fixture prompt test_prompt_with_embedded_resource",
  "prompts-get-with-image": "no prompts: needs the suite's fixture prompt test_prompt_with_image",
  "server-sse-multiple-streams":
    "a warning, counted as a failure: /mcp is stateless by design (no Mcp-Session-Id, no GET stream; each POST is answered with one JSON body)",
};

type Check = { id: string; status: "SUCCESS" | "FAILURE" | "WARNING" | "INFO" | "SKIPPED"; errorMessage?: string };

/** scenario → its checks, from the suite's output directory (one folder per scenario: server-<name>-<timestamp>/checks.json) */
async function readResults(dir: string): Promise<Map<string, Check[]>> {
  const results = new Map<string, Check[]>();
  for (const entry of await readdir(dir)) {
    const scenario = /^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$/.exec(entry)?.[1];
    if (!scenario) continue;
    results.set(scenario, JSON.parse(await readFile(path.join(dir, entry, "checks.json"), "utf8")) as Check[]);
  }
  return results;
}

/** as the suite judges a scenario against a baseline: any failure or warning */
const fails = (checks: Check[]) => checks.some((c) => c.status === "FAILURE" || c.status === "WARNING");

describe("the official MCP conformance suite against /mcp", () => {
  const dataDir = ".data/fault-mcp-conformance";
  let server: RunningServer;
  let proxy: BearerProxy;
  let work: string;

  beforeAll(async () => {
    await removeDataDir(dataDir);
    work = await mkdtemp(path.join(tmpdir(), "idemgate-conformance-"));
    // no DATABASE_URL, no REDIS_URL: the embedded default, as a first `npm start`
    server = await startServer({ port: testPort(3184), dataDir, env: { IDEMGATE_RECONCILE_INTERVAL_MS: "0" } });
    proxy = await startBearerProxy(server.url, (await server.credentials()).apiToken);
  });
  afterAll(async () => {
    await proxy?.close();
    await server?.stop();
    await removeDataDir(dataDir);
    if (work) await rm(work, { recursive: true, force: true });
  });

  it("passes every scenario but the expected failures, and fails each of those", async () => {
    const baseline = path.join(work, "expected-failures.yml");
    await writeFile(baseline, `server:\n${Object.keys(EXPECTED_FAILURES).map((s) => `  - ${s}\n`).join("")}`);
    const out = path.join(work, "results");
    const args = ["--yes", "--package", NODE_22, "--", "node", SUITE, "server", "--url", `${proxy.url}/mcp`, "--expected-failures", baseline, "--output-dir", out];
    const run = await promisify(execFile)("npx", args, { cwd: ROOT, timeout: 150_000, maxBuffer: 16 * 1024 * 1024 }).then(
      ({ stdout, stderr }) => ({ code: 0, output: stdout + stderr }),
      (err: { code?: number; stdout?: string; stderr?: string; message: string }) => ({ code: err.code ?? -1, output: `${err.stdout ?? ""}${err.stderr ?? err.message}` }),
    );
    const summary = run.output.slice(run.output.indexOf("=== SUMMARY ==="));
    const results = await readResults(out).catch(() => new Map<string, Check[]>());
    // the suite ran here at all (a suite that could not start reports no scenario)
    expect(results.size, `the suite reported no scenarios:\n${run.output.slice(-4000)}`).toBeGreaterThan(20);

    const table = [...results].map(([scenario, checks]) => ({ scenario, failed: fails(checks), checks: checks.filter((c) => c.status !== "INFO") }));
    const unexpected = table.filter((r) => r.failed && !(r.scenario in EXPECTED_FAILURES));
    const nowPassing = table.filter((r) => !r.failed && r.scenario in EXPECTED_FAILURES).map((r) => r.scenario);
    const notRun = Object.keys(EXPECTED_FAILURES).filter((s) => !results.has(s));
    // all three at once, so that a failure names every scenario to look at
    expect(
      {
        failedButShouldPass: unexpected.map((r) => `${r.scenario}: ${r.checks.filter((c) => c.status !== "SUCCESS").map((c) => `${c.id} ${c.status} ${c.errorMessage ?? ""}`).join("; ")}`),
        // take these off EXPECTED_FAILURES, and off the table in docs/integrate.md
        expectedToFailButPassed: nowPassing,
        expectedToFailButNotRun: notRun,
      },
      summary,
    ).toEqual({ failedButShouldPass: [], expectedToFailButPassed: [], expectedToFailButNotRun: [] });
    // the scenarios that pass pass for real: each has a successful check
    for (const r of table.filter((t) => !t.failed && t.checks.length > 0)) expect(r.checks.some((c) => c.status === "SUCCESS"), r.scenario).toBe(true);
    for (const scenario of ["server-initialize", "ping", "tools-list"]) expect(table.find((r) => r.scenario === scenario)?.failed, scenario).toBe(false);
    // and the suite's own verdict on the same baseline agrees
    expect(run.code, summary).toBe(0);
    expect(run.output).toContain("Baseline check passed");
  });

  it("dns-rebinding-protection's forged request is refused with 403 before the token is looked at, with or without one", async () => {
    const port = new URL(server.url).port;
    const token = (await server.credentials()).apiToken;
    const send = (headers: Record<string, string>) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "rebinding", version: "1" } } });
        const req = request({ host: "127.0.0.1", port, method: "POST", path: "/mcp", headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream", ...headers } }, (res) => {
          let text = "";
          res.setEncoding("utf8");
          res.on("data", (chunk: string) => (text += chunk));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
        });
        req.on("error", reject);
        req.end(body);
      });
    const forged = { Host: "evil.example.com", Origin: "http://evil.example.com" };
    for (const headers of [forged, { ...forged, Authorization: `Bearer ${token}` }, { Host: "evil.example.com", Authorization: `Bearer ${token}` }]) {
      const answer = await send(headers);
      expect(answer.status, JSON.stringify(headers)).toBe(403);
      expect(JSON.parse(answer.body)).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32000 } });
    }
    // the server listens on 127.0.0.1 (test/support/server.ts): its loopback names pass, with their own origin
    const local = await send({ Host: `localhost:${port}`, Origin: `http://localhost:${port}`, Authorization: `Bearer ${token}` });
    expect(local.status).toBe(200);
    expect((await send({ Host: `localhost:${port}`, Origin: "http://localhost:6274", Authorization: `Bearer ${token}` })).status).toBe(403);
  });
});
