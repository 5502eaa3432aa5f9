import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { IdemgateClient, ToolPausedError } from "../lib/client/index";
import { expect, test, type APIRequestContext } from "./fixtures";
import { signInAsOperator } from "./auth";
import { UpstreamService } from "./upstream-service";

// An agent-like script makes a run (one Idemgate-Session): a call, its replay, a duplicate refused
// while the first still runs, and a call whose outcome is unknown (held). The run page shows them in
// order and its links lead to the keys. Then an operator pauses the tool from its page: the next first
// execution through /invoke, the reservation API (the TypeScript client's guard()) and MCP is refused
// with tool_paused and nothing runs at the counting service, while a done key still replays; resume
// restores it. Both server configurations.

const RUN = Date.now().toString(36);
const TOOL = "billing.create_invoice";

const service = new UpstreamService();
test.beforeAll(({}, testInfo) => service.start(testInfo.project.name));
test.afterAll(() => service.stop());
test.describe.configure({ mode: "serial" });

function invoke(request: APIRequestContext, token: string, key: string, session: string, args: unknown = { customerId: `cus-${key}`, amountCents: 1200 }) {
  return request.post(`/api/v1/tools/${TOOL}/invoke`, { headers: { Authorization: `Bearer ${token}`, "Idempotency-Key": key, "Idemgate-Session": session }, data: args });
}

/** the tool's pause as GET /api/v1/tools lists it to an API token */
async function listedPause(request: APIRequestContext, token: string): Promise<unknown> {
  const res = await request.get("/api/v1/tools", { headers: { Authorization: `Bearer ${token}` } });
  expect(res.status()).toBe(200);
  const { tools } = (await res.json()) as { tools: { name: string; paused: unknown }[] };
  return tools.find((t) => t.name === TOOL)?.paused;
}

test("a run's calls in order on its page, and a paused tool refuses new calls everywhere while done keys replay", async ({ page, request, baseURL }, testInfo) => {
  const { apiToken } = await signInAsOperator(page, testInfo);
  const session = `e2e-run-${testInfo.project.name}-${RUN}`;
  const key = (label: string) => `${session}-${label}`;

  // the agent's run
  service.behaviour = "ok";
  // the invoice service answers 201 Created, which the gateway passes on
  expect((await invoke(request, apiToken, key("a"), session)).status()).toBe(201);
  const replay = await invoke(request, apiToken, key("a"), session);
  expect(replay.headers()["idempotent-replayed"]).toBe("true");
  service.behaviour = "hold";
  const running = invoke(request, apiToken, key("b"), session);
  await expect.poll(() => service.effectsOf(key("b"))).toBe(1);
  expect((await invoke(request, apiToken, key("b"), session)).status()).toBe(409);
  service.answerHeld();
  expect((await running).status()).toBe(201);
  service.behaviour = "fail_after_effect";
  expect((await invoke(request, apiToken, key("c"), session)).status()).toBe(502);
  service.behaviour = "ok";

  // the run page: every call in order, each linked to its key
  await page.goto("/search");
  await page.goto(`/search?q=${encodeURIComponent(`session:${session}`)}`);
  await expect(page.getByTestId("run-session")).toHaveText(session);
  await expect
    .poll(async () => page.getByTestId("run-call").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-happened"))), { intervals: [500] })
    .toEqual(["ran", "replayed", "ran", "refused_duplicate", "held_unknown"]);
  // the audit log's rows arrive within a moment: reload until they have
  await page.reload();
  await expect(page.getByTestId("run-call")).toHaveCount(5);
  await page.getByTestId("run-call").nth(4).getByTestId("run-call-key").click();
  await expect(page).toHaveURL(new RegExp(`/keys/demo/${key("c")}$`));
  await expect(page.getByTestId("key-run-link")).toContainText(session);
  await page.getByTestId("key-run-link").click();
  await expect(page.getByTestId("run-session")).toHaveText(session);
  // a tampered cursor (a time no Date can hold) opens the run from its first call, not an error page
  const tampered = Buffer.from(JSON.stringify([Number.MAX_SAFE_INTEGER, "e-1"])).toString("base64url");
  await page.goto(`/runs/${encodeURIComponent(session)}?scope=demo&cursor=${tampered}`);
  await expect(page).toHaveURL(new RegExp(`/runs/${session}\\?scope=demo$`));
  await expect(page.getByTestId("run-call")).toHaveCount(5);
  await page.goto("/");
  await expect(page.getByTestId("held-runs").getByText(session)).toBeVisible();

  // pause from the tool's page
  await page.goto(`/tools/${TOOL}`);
  await page.getByTestId("pause-tool").click();
  await page.getByTestId("pause-dialog").getByRole("textbox").fill("the invoicing service double-bills");
  await page.getByTestId("confirm-pause").click();
  await expect(page.getByTestId("pause-panel")).toHaveAttribute("data-paused", "true");
  await expect(page.getByTestId("pause-detail")).toContainText("the invoicing service double-bills. Callers get 503 tool_paused");
  try {
    const before = service.effects.length;
    const refused = await invoke(request, apiToken, key("paused"), session);
    expect(refused.status()).toBe(503);
    expect(refused.headers()["retry-after"]).toBe("30");
    expect(await refused.json()).toMatchObject({ type: "/problems/tool_paused", reason: "the invoicing service double-bills" });
    // a done key still answers
    const again = await invoke(request, apiToken, key("a"), session);
    expect(again.status()).toBe(201);
    expect(again.headers()["idempotent-replayed"]).toBe("true");

    // MCP: an isError result saying so
    const client = new Client({ name: "e2e-runs", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", baseURL), { requestInit: { headers: { Authorization: `Bearer ${apiToken}`, "Idemgate-Session": session } } }));
    try {
      const result = (await client.callTool({ name: TOOL, arguments: { customerId: "cus-mcp", amountCents: 300 }, _meta: { "io.idemgate/idempotency-key": key("mcp") } })) as CallToolResult;
      expect(result.isError).toBe(true);
      expect(JSON.stringify(result.content)).toContain("tool_paused");
    } finally {
      await client.close();
    }
    expect(service.effects.length).toBe(before);

    // the overview says so too, and the tool list an agent reads
    await page.goto("/");
    await expect(page.getByTestId("paused-tools")).toContainText(TOOL);
    expect(await listedPause(request, apiToken)).toMatchObject({ reason: "the invoicing service double-bills", source: "operator", pausedAt: expect.any(String) });
  } finally {
    await page.goto(`/tools/${TOOL}`);
    await page.getByTestId("resume-tool").click();
    await page.getByTestId("pause-dialog").getByRole("textbox").fill("fixed upstream");
    await page.getByTestId("confirm-resume").click();
    await expect(page.getByTestId("pause-panel")).toHaveAttribute("data-paused", "false");
  }
  expect(await listedPause(request, apiToken)).toBeNull();
  const resumed = await invoke(request, apiToken, key("paused"), session);
  expect(resumed.status()).toBe(201);
  expect(service.effectsOf(key("paused"))).toBe(1);
});

test("the reservation API refuses a paused client-run tool: guard() does not run the function", async ({ page, baseURL }, testInfo) => {
  const { apiToken } = await signInAsOperator(page, testInfo);
  const tool = "ledger.record";
  const client = new IdemgateClient({ baseUrl: baseURL!, token: apiToken, replayCache: false });
  const args = { account: `acct-${RUN}`, amountCents: 100, currency: "EUR" };
  let ran = 0;
  const done = await client.guard(tool, args, () => ({ posted: ++ran }), { key: `guard-done-${testInfo.project.name}-${RUN}` });
  expect(done).toEqual({ posted: 1 });
  const pause = await page.request.post(`/api/v1/tools/${tool}/pause`, { data: { reason: "ledger migration" }, headers: { Origin: new URL(baseURL!).origin } });
  expect(pause.status(), await pause.text()).toBe(200);
  try {
    const err = await client.guard(tool, args, () => ++ran, { key: `guard-new-${testInfo.project.name}-${RUN}` }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ToolPausedError);
    expect(ran).toBe(1);
    expect(await client.guard(tool, args, () => ({ posted: ++ran }), { key: `guard-done-${testInfo.project.name}-${RUN}` })).toEqual({ posted: 1 });
  } finally {
    const resume = await page.request.post(`/api/v1/tools/${tool}/resume`, { data: { reason: "migration done" }, headers: { Origin: new URL(baseURL!).origin } });
    expect(resume.status(), await resume.text()).toBe(200);
  }
  expect(await client.guard(tool, args, () => ++ran, { key: `guard-new-${testInfo.project.name}-${RUN}` })).toBe(2);
});
