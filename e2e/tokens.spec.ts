import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { expect, test, type APIRequestContext, type APIResponse, type Page, type TestInfo } from "./fixtures";
import { seededCredentials, signIn, signInAsOperator, VIEWER } from "./auth";
import environments from "./environments.mjs";
import { SCREENSHOTS } from "./screenshots";

// API tokens in the console (operators only) and from the command line, on both configurations:
// on the embedded one the CLI reaches the database through the running server (lib/auth/cli-access.ts).

const RUN = Date.now().toString(36);
let seq = 0;
const newScope = (label: string) => `e2e-${RUN}-${label}-${++seq}`;

function shot(page: Page, testInfo: TestInfo, name: string) {
  if (!SCREENSHOTS) return Promise.resolve();
  return page.screenshot({ path: `e2e/screenshots/tokens-${name}-${testInfo.project.name}.png`, fullPage: true, animations: "disabled" });
}

/** A read through the gateway with `token`: what any caller of the API does. */
function useToken(request: APIRequestContext, token: string): Promise<APIResponse> {
  return request.post("/api/v1/tools/payments.list_charges/invoke", { headers: { authorization: `Bearer ${token}` }, data: { customerId: `cus-${RUN}` } });
}

async function expectProblem(res: APIResponse, status: number, code: string): Promise<Record<string, unknown>> {
  expect(res.status(), await res.text()).toBe(status);
  expect(res.headers()["content-type"]).toContain("application/problem+json");
  const body = await res.json();
  expect(body).toMatchObject({ type: `/problems/${code}`, status });
  return body;
}

function root(testInfo: TestInfo): string {
  return path.dirname(testInfo.config.configFile ?? "playwright.config.ts");
}

function dataDirOf(testInfo: TestInfo): string {
  return path.resolve(root(testInfo), (testInfo.project.metadata as { dataDir: string }).dataDir);
}

/** Runs `idemgate …` as an operator on the server's machine would, against this project's server's data. */
function idemgate(testInfo: TestInfo, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const servers = testInfo.project.name === "servers";
  const env = {
    ...process.env,
    IDEMGATE_DATA_DIR: dataDirOf(testInfo),
    DATABASE_URL: servers ? environments.servers.databaseUrl : "",
    REDIS_URL: servers ? environments.servers.redisUrl : "",
    IDEMGATE_REDIS_PREFIX: servers ? environments.servers.redisPrefix : "",
  };
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(root(testInfo), "bin", "idemgate.mjs"), ...args], { cwd: root(testInfo), env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c) => (stdout += c));
    child.stderr.on("data", (c) => (stderr += c));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

test("an operator creates a token (shown once, copied), uses it, revokes it, sees it refused with 401 and both actions in the audit trail", async ({ page, request }, testInfo) => {
  await page.setViewportSize({ width: 1440, height: 900 });
  const { email } = await signInAsOperator(page, testInfo);
  const origin = new URL(page.url()).origin;
  await page.context().grantPermissions(["clipboard-read", "clipboard-write"], { origin });
  await page.getByRole("navigation", { name: "Console", exact: true }).getByRole("link", { name: "API tokens" }).click();
  await expect(page.getByRole("heading", { name: "API tokens" })).toBeVisible();

  const scope = newScope("console");
  const label = `billing agent ${RUN}`;
  await page.getByTestId("create-token").click();
  const form = page.getByTestId("create-token-dialog");
  // a scope the API would refuse is said before anything is sent
  await form.getByLabel(/Scope/).fill("not a scope!");
  await form.getByTestId("confirm-create-token").click();
  await expect(form.getByTestId("token-scope-hint")).toHaveClass(/text-bad/);
  await expect(form.getByLabel(/Scope/)).toHaveAttribute("aria-invalid", "true");
  await form.getByLabel(/Scope/).fill(scope);
  await form.getByLabel(/Label/).fill(label);
  await form.getByTestId("token-advisory").check();
  await form.getByTestId("confirm-create-token").click();

  const shown = page.getByTestId("token-created-dialog");
  await expect(shown).toBeVisible();
  const secret = (await shown.getByTestId("new-token").textContent())!.trim();
  expect(secret).toMatch(/^idg_[A-Za-z0-9_-]{43}$/);
  await expect(shown).toContainText("only time the token is shown");
  await shown.getByRole("button", { name: "Copy token" }).click();
  await expect(shown.getByRole("button", { name: "Copied" })).toBeVisible();
  expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(secret);
  await shot(page, testInfo, "created-1440");
  await shown.getByTestId("token-created-done").click();

  const row = page.locator(`[data-testid="token-row"][data-scope="${scope}"]`);
  await expect(row).toHaveCount(1);
  await expect(row).toHaveAttribute("data-status", "active");
  await expect(row).toContainText(label);
  await expect(row).toContainText("advisory");
  // what the Keys column's words mean is said on the page, not only in a tooltip
  await expect(page.getByTestId("keys-kind-legend")).toContainText("authoritative keys come from the orchestrator");
  await expect(row.getByTestId("token-last-used")).toHaveText("never");
  const tokenId = (await row.getAttribute("data-id"))!;

  // the new token works against the API, in its own scope
  const used = await useToken(request, secret);
  expect(used.status(), await used.text()).toBe(200);
  // a key's timeline names the caller as this page does: the token's label and prefix, not its id
  const prefix = (await row.locator(".font-mono").first().textContent())!.replace("…", "");
  const keyName = `e2e-caller-${RUN}`;
  const charged = await request.post("/api/v1/tools/payments.charge/invoke", {
    headers: { authorization: `Bearer ${secret}`, "Idempotency-Key": keyName },
    data: { customerId: `cus-${RUN}`, amountCents: 100, currency: "EUR" },
  });
  expect(charged.status(), await charged.text()).toBe(200);
  await page.goto(`/keys/${scope}/${keyName}`);
  await expect(page.getByTestId("timeline")).toContainText(`caller ${label} (${prefix}…)`);
  await expect(page.getByTestId("timeline")).not.toContainText(tokenId);
  await page.goto("/tokens");
  const own = await request.get("/api/v1/keys", { headers: { authorization: `Bearer ${secret}` } });
  expect(own.status()).toBe(200);
  // "last used" follows (written after the lookup, in the background)
  await expect
    .poll(async () => {
      await page.reload();
      return page.locator(`[data-testid="token-row"][data-scope="${scope}"]`).getByTestId("token-last-used").textContent();
    })
    .toMatch(/UTC$/);
  // the secret is never shown again
  expect(await page.content()).not.toContain(secret);
  const listed = await page.request.get("/api/v1/tokens");
  expect(await listed.text()).not.toContain(secret);
  await shot(page, testInfo, "list-1440");

  // revoking needs a reason
  await page.locator(`[data-testid="token-row"][data-scope="${scope}"]`).getByTestId("revoke-token").click();
  const revoke = page.getByTestId("revoke-token-dialog");
  await expect(revoke.getByTestId("confirm-revoke-token")).toBeDisabled();
  const reason = `e2e: the billing agent was retired ${RUN}`;
  await revoke.getByLabel(/Reason/).fill(reason);
  await revoke.getByTestId("confirm-revoke-token").click();
  await expect(page.getByTestId("tokens-notice")).toContainText("Revoked");
  await expect(page.locator(`[data-testid="token-row"][data-scope="${scope}"]`)).toHaveAttribute("data-status", "revoked");
  await expect(page.locator(`[data-testid="token-row"][data-scope="${scope}"]`).getByTestId("revoke-token")).toHaveCount(0);
  await expectProblem(await useToken(request, secret), 401, "unauthorized");
  // revoking again changes nothing
  await expectProblem(await page.request.post(`/api/v1/tokens/${tokenId}/revoke`, { headers: { origin }, data: { reason: "again" } }), 404, "not_found");

  // both in the audit trail, with the operator as actor
  await page.goto(`/audit?actor=${encodeURIComponent(email)}&action=token_create`);
  const created = page.getByTestId("audit-row").filter({ hasText: label });
  await expect(created).toHaveCount(1);
  await expect(created).toHaveAttribute("data-actor", email);
  await expect(created.getByTestId("audit-token-target")).toContainText(secret.slice(0, 10));
  await page.goto(`/audit?actor=${encodeURIComponent(email)}&action=token_revoke`);
  const revokedRow = page.getByTestId("audit-row").filter({ hasText: reason });
  await expect(revokedRow).toHaveCount(1);
  await expect(revokedRow.getByTestId("audit-token-target")).toContainText(secret.slice(0, 10));
  await shot(page, testInfo, "audit-1440");
});

test("bad input to the token API is a problem and creates nothing", async ({ page }, testInfo) => {
  await signInAsOperator(page, testInfo, "/tokens");
  const origin = new URL(page.url()).origin;
  const before = ((await (await page.request.get("/api/v1/tokens")).json()).tokens as unknown[]).length;
  const bad = await expectProblem(await page.request.post("/api/v1/tokens", { headers: { origin }, data: { scope: "no spaces allowed" } }), 400, "invalid_arguments");
  expect(JSON.stringify(bad)).toContain("scope");
  await expectProblem(await page.request.post("/api/v1/tokens", { headers: { origin }, data: { label: "no scope" } }), 400, "invalid_arguments");
  await expectProblem(await page.request.post("/api/v1/tokens/nope/revoke", { headers: { origin }, data: { reason: "" } }), 400, "invalid_arguments");
  // another site's page cannot create one with the operator's cookie
  await expectProblem(await page.request.post("/api/v1/tokens", { headers: { origin: "http://evil.example" }, data: { scope: "evil" } }), 403, "forbidden");
  expect(((await (await page.request.get("/api/v1/tokens")).json()).tokens as unknown[]).length).toBe(before);
});

test("a viewer sees no tokens page and the API refuses them", async ({ page, request, consoleErrors }, testInfo) => {
  // the page a viewer may not see answers 404, which the browser reports
  consoleErrors.allow(/status of 404 \(Not Found\) \(http:\/\/[^/]+\/tokens/);
  await signIn(page, VIEWER);
  await expect(page.getByTestId("operator-role")).toHaveText("viewer");
  await expect(page.getByRole("link", { name: "API tokens" })).toHaveCount(0);
  const res = await page.goto("/tokens");
  expect(res?.status()).toBe(404);
  await expect(page.getByTestId("create-token")).toHaveCount(0);
  const origin = new URL(page.url()).origin;
  await expectProblem(await page.request.get("/api/v1/tokens"), 403, "forbidden");
  await expectProblem(await page.request.post("/api/v1/tokens", { headers: { origin }, data: { scope: "viewer-made" } }), 403, "forbidden");
  // nor may a tenant's token manage tokens
  const { apiToken } = seededCredentials(testInfo);
  await expectProblem(await request.get("/api/v1/tokens", { headers: { authorization: `Bearer ${apiToken}` } }), 403, "forbidden");
});

test("at 390 px the tokens are cards, and the create dialog fits", async ({ page }, testInfo) => {
  await page.setViewportSize({ width: 390, height: 844 });
  await signInAsOperator(page, testInfo);
  const origin = new URL(page.url()).origin;
  const scope = newScope("narrow");
  const made = await page.request.post("/api/v1/tokens", { headers: { origin }, data: { scope, label: "a long label for the narrow screen" } });
  expect(made.status()).toBe(201);
  await page.goto("/tokens");
  await expect(page.getByTestId("tokens-table")).toBeHidden();
  const card = page.locator(`[data-testid="token-card"][data-scope="${scope}"]`);
  await expect(card).toBeVisible();
  await expect(card.getByTestId("revoke-token")).toBeVisible();
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
  await shot(page, testInfo, "list-390");
  await page.getByText("Menu", { exact: true }).click();
  await expect(page.getByRole("navigation", { name: "Console (menu)" }).getByRole("link", { name: "API tokens" })).toBeVisible();
  await page.keyboard.press("Escape");
  await page.getByTestId("create-token").click();
  await expect(page.getByTestId("create-token-dialog")).toBeVisible();
  await shot(page, testInfo, "create-390");
});

test("idemgate token create, list and revoke work while the server runs, and are audited as the CLI", async ({ page, request }, testInfo) => {
  // five CLI processes (the first may bundle the CLI): seconds each on a busy machine
  test.setTimeout(120_000);
  const embedded = testInfo.project.name === "embedded";
  // the embedded database is the server's: the CLI reaches it through the address the server published
  expect(existsSync(path.join(dataDirOf(testInfo), "server.json"))).toBe(embedded);

  const scope = newScope("cli");
  const made = await idemgate(testInfo, ["token", "create", "--scope", scope, "--label", `cli ${RUN}`, "--json"]);
  expect(made.code, made.stderr).toBe(0);
  const created = JSON.parse(made.stdout) as { id: string; token: string; scope: string; prefix: string; advisoryKeys: boolean };
  expect(created).toMatchObject({ scope, advisoryKeys: false });
  expect(created.token).toMatch(/^idg_/);
  expect((await useToken(request, created.token)).status()).toBe(200);

  const listed = await idemgate(testInfo, ["token", "list", "--json"]);
  expect(listed.code, listed.stderr).toBe(0);
  const row = (JSON.parse(listed.stdout) as { id: string; scope: string; revokedAt: string | null }[]).find((t) => t.id === created.id);
  expect(row).toMatchObject({ scope, revokedAt: null });
  expect(listed.stdout).not.toContain(created.token);

  // bad input is one readable line and creates nothing
  const bad = await idemgate(testInfo, ["token", "create", "--scope", "no spaces"]);
  expect(bad.code).toBe(1);
  expect(bad.stderr).toMatch(/^idemgate: .*scope "no spaces" is invalid/);
  expect(bad.stdout).toBe("");

  const revoked = await idemgate(testInfo, ["token", "revoke", created.id, "--reason", `cli revocation ${RUN}`]);
  expect(revoked.code, revoked.stderr).toBe(0);
  expect(revoked.stdout).toContain(`Revoked API token ${created.id}`);
  // through the server that revoked it the token is refused at once; a direct CLI revocation reaches
  // a running server within its 5 s token cache
  await expect.poll(async () => (await useToken(request, created.token)).status(), { timeout: 10_000 }).toBe(401);
  const again = await idemgate(testInfo, ["token", "revoke", created.id, "--reason", "again"]);
  expect(again.code).toBe(1);
  expect(again.stderr).toMatch(/^idemgate: no active API token with id/);

  // in the console: the token's row, and the CLI as the actor of both actions
  await signInAsOperator(page, testInfo, "/tokens");
  await expect(page.locator(`[data-testid="token-row"][data-id="${created.id}"]`)).toHaveAttribute("data-status", "revoked");
  await page.goto(`/audit?action=token_revoke`);
  const audit = page.getByTestId("audit-row").filter({ hasText: `cli revocation ${RUN}` });
  await expect(audit).toHaveCount(1);
  expect(await audit.getAttribute("data-actor")).toMatch(/^cli:\S+@\S+$/);
});

test("the command line's credential is this server's, for API tokens only", async ({ request }, testInfo) => {
  const file = path.join(dataDirOf(testInfo), "server.json");
  if (testInfo.project.name !== "embedded") {
    // with DATABASE_URL the CLI opens the database itself: nothing is published
    expect(existsSync(file)).toBe(false);
    return;
  }
  const access = JSON.parse(await readFile(file, "utf8")) as { pid: number; url: string; token: string };
  expect(new URL(access.url).port).toBe(new URL(testInfo.project.use.baseURL!).port);
  const as = (token: string, actor: string | null = "cli%3Ae2e%40test") => ({ authorization: `Bearer ${token}`, ...(actor ? { "idemgate-actor": actor } : {}) });
  expect((await request.get("/api/v1/tokens", { headers: as(access.token) })).status()).toBe(200);
  // a guessed or old credential
  await expectProblem(await request.get("/api/v1/tokens", { headers: as(`idgl_${"A".repeat(43)}`) }), 401, "unauthorized");
  // it names a cli: actor
  await expectProblem(await request.get("/api/v1/tokens", { headers: as(access.token, null) }), 400, "invalid_header");
  await expectProblem(await request.post("/api/v1/tokens", { headers: as(access.token, "admin%40idemgate.local"), data: { scope: "x" } }), 400, "invalid_header");
  // nothing but tokens: not a tenant's API, not an operator's actions
  await expectProblem(await request.get("/api/v1/keys", { headers: as(access.token) }), 403, "forbidden");
  await expectProblem(await useToken(request, access.token), 401, "unauthorized");
  await expectProblem(await request.post("/api/v1/keys/demo/some-key/release", { headers: as(access.token), data: { reason: "not the CLI's" } }), 403, "forbidden");
});
