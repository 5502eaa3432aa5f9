import { expect, test, type APIRequestContext, type Page, type TestInfo } from "./fixtures";
import { signIn, signInAsOperator, VIEWER } from "./auth";
import { SCREENSHOTS } from "./screenshots";

// Anomalies made through the gateway, found by a reconciler pass started from the console, then
// investigated and acknowledged (projects "embedded" and "servers"). The e2e servers run the demo
// tools with a 3 s lease (IDEMGATE_DEMO_LEASE_MS), so a simulated crash is stuck within seconds.

const RUN = Date.now().toString(36);
const keyFor = (label: string, testInfo: TestInfo) => `e2e-anomaly-${RUN}-${testInfo.project.name}-${label}`;
const keyUrl = (key: string) => `/keys/demo/${encodeURIComponent(key)}`;

async function shot(page: Page, testInfo: TestInfo, name: string, dark = false) {
  if (!SCREENSHOTS) return;
  const path = (suffix: string) => `e2e/screenshots/anomalies-${name}-${testInfo.project.name}${suffix}.png`;
  await page.screenshot({ path: path(""), fullPage: true, animations: "disabled" });
  if (dark) {
    await page.emulateMedia({ colorScheme: "dark" });
    await page.screenshot({ path: path("-dark"), fullPage: true, animations: "disabled" });
    await page.emulateMedia({ colorScheme: "light" });
  }
}

function charge(request: APIRequestContext, token: string, key: string, customerId: string, extra: { session?: string; crash?: boolean } = {}) {
  return request.post("/api/v1/tools/payments.charge/invoke", {
    headers: { Authorization: `Bearer ${token}`, "Idempotency-Key": key, ...(extra.session ? { "Idemgate-Session": extra.session } : {}) },
    data: { customerId, amountCents: 4200, currency: "EUR", ...(extra.crash ? { simulate: { outcome: "crash_after_effect" } } : {}) },
  });
}

async function keyState(page: Page, key: string): Promise<string> {
  const res = await page.request.get(`/api/v1/keys/demo/${encodeURIComponent(key)}`);
  return ((await res.json()) as { state: string }).state;
}

const row = (page: Page, key: string, type: string) => page.locator(`[data-testid="anomaly-row"][data-key="${key}"][data-type="${type}"]`);

async function runReconciler(page: Page) {
  await page.getByTestId("run-reconciler").click();
  await expect(page.getByTestId("reconcile-result")).toBeVisible();
  await expect(page.getByTestId("reconcile-result")).toContainText(/Examined \d+ executions?/);
}

/** ids of the anomalies the tests made, by project (a worker may run both projects) */
const made: Record<string, { crash?: string; crashKey?: string; stale?: string }> = {};

test.describe.configure({ mode: "serial" });

test("a crashed call becomes an Unknown outcome anomaly after 'Run reconciler now'", async ({ page, request }, testInfo) => {
  const { apiToken } = await signInAsOperator(page, testInfo, "/anomalies");
  await expect(page.getByRole("heading", { name: "Anomalies", level: 1 })).toBeVisible();

  // on a fresh server the list starts empty, and says what the reconciler watches
  const before = (await (await page.request.get("/api/v1/anomalies?status=open&limit=1")).json()) as { items: unknown[] };
  if (before.items.length === 0) {
    await expect(page.getByTestId("anomalies-empty")).toContainText("No open anomalies.");
    // the e2e servers run no background reconciler (playwright.config.ts): passes start from the console
    await expect(page.getByTestId("anomalies-empty")).toContainText("The background reconciler is off");
    await expect(page.getByTestId("anomalies-empty")).toContainText("calls that started and never reported an outcome");
    await shot(page, testInfo, "empty");
  }

  const key = keyFor("crash", testInfo);
  expect((await charge(request, apiToken, key, `cus-anomaly-${RUN}`, { crash: true })).status()).toBe(500);
  // the lease (3 s) has to pass before the missing outcome means anything
  await expect.poll(() => keyState(page, key), { timeout: 15_000, intervals: [1_000] }).toBe("stuck");

  await runReconciler(page);
  expect(Number(await page.getByTestId("reconcile-result").getAttribute("data-flagged"))).toBeGreaterThanOrEqual(1);
  const crashRow = row(page, key, "orphan_unknown_outcome");
  await expect(crashRow).toBeVisible();
  await expect(crashRow).toContainText("Unknown outcome");
  await expect(crashRow).toContainText("payments.charge");
  await expect(crashRow.getByTestId("anomaly-key-link")).toHaveAttribute("href", keyUrl(key));
  await expect(crashRow).toHaveAttribute("data-status", "open");
  await expect.poll(async () => Number(await page.getByTestId("open-count-orphan_unknown_outcome").getAttribute("data-count"))).toBeGreaterThanOrEqual(1);
  await expect(page.getByTestId("open-count-orphan_unknown_outcome")).toContainText("its side effect may or may not have happened");

  // filters live in the URL: a shared link shows the same view
  await page.getByTestId("filter-type").selectOption("stale_suppression");
  await expect(page).toHaveURL(/type=stale_suppression/);
  await expect(crashRow).toHaveCount(0);
  await page.getByTestId("open-count-orphan_unknown_outcome").click();
  await expect(page).toHaveURL(/type=orphan_unknown_outcome/);
  await expect(crashRow).toBeVisible();
  await page.reload();
  await expect(page.getByTestId("filter-type")).toHaveValue("orphan_unknown_outcome");
  await expect(crashRow).toBeVisible();

  made[testInfo.project.name] = { crash: (await crashRow.getAttribute("data-id")) ?? undefined, crashKey: key };
  await page.getByTestId("filter-clear").click();
  await expect(page).toHaveURL(/\/anomalies$/);
  await expect(page.getByTestId("anomalies-table")).toHaveAttribute("aria-busy", "false");
  await shot(page, testInfo, "list", true);
});

test("a replay to another session is flagged as a stale suppression, with its reasons", async ({ page, request }, testInfo) => {
  const { apiToken } = await signInAsOperator(page, testInfo, "/anomalies");
  const key = keyFor("stale", testInfo);
  const customer = `cus-stale-${RUN}`;
  expect((await charge(request, apiToken, key, customer, { session: "agent-run-A" })).status()).toBe(200);
  const replay = await charge(request, apiToken, key, customer, { session: "agent-run-B" });
  expect(replay.status()).toBe(200);
  expect(replay.headers()["idempotent-replayed"]).toBe("true");

  await runReconciler(page);
  const staleRow = row(page, key, "stale_suppression");
  await expect(staleRow).toBeVisible();
  await expect(staleRow).toContainText("Stale suppression");
  await expect(page.getByTestId("open-count-stale_suppression")).not.toHaveAttribute("data-count", "0");
  await shot(page, testInfo, "reconciled");
  made[testInfo.project.name] = { ...made[testInfo.project.name], stale: (await staleRow.getAttribute("data-id")) ?? undefined };

  await staleRow.getByTestId("anomaly-link").click();
  await expect(page).toHaveURL(/\/anomalies\/[0-9a-f-]+$/);
  await expect(page.getByTestId("anomaly-type")).toHaveText("Stale suppression");
  await expect(page.getByTestId("stale-reasons")).toContainText("Answered to session agent-run-B with the result of session agent-run-A");
  await expect(page.getByTestId("evidence-session")).toContainText("agent-run-B");
  await expect(page.getByTestId("evidence-gap")).toContainText("stale threshold");
  await expect(page.getByTestId("what-to-do")).toContainText("mint one key per logical action");
  // the key is done: nothing to release or resolve, only to look at
  await expect(page.getByTestId("key-state-now")).toHaveAttribute("data-state", "done");
  await expect(page.getByTestId("key-release")).toHaveCount(0);
  await expect(page.getByTestId("timeline-link")).toHaveAttribute("href", `${keyUrl(key)}#timeline-heading`);
  await shot(page, testInfo, "detail-stale", true);
  const anomalyUrl = new URL(page.url()).pathname;

  // the key's page lists the anomaly and leads to its tool's page
  await page.getByTestId("timeline-link").click();
  const related = page.getByTestId("key-relations");
  await expect(related.getByTestId("related-anomaly")).toHaveAttribute("href", anomalyUrl);
  await expect(related.getByTestId("related-tool")).toHaveAttribute("href", "/tools/payments.charge");
  await related.getByTestId("related-tool").click();
  await expect(page).toHaveURL(/\/tools\/payments\.charge$/);
  // the tool's suppression log marks the replay as flagged stale and links the anomaly
  const logRow = page.getByTestId("suppression-row").filter({ hasText: key });
  await expect(logRow).toHaveAttribute("data-stale", "true");
  await logRow.getByTestId("stale-flag").click();
  await expect(page).toHaveURL(new RegExp(`${anomalyUrl}$`));
});

test("export a filtered anomaly list: the download holds the filter's anomalies, one a line", async ({ page }, testInfo) => {
  await signInAsOperator(page, testInfo, "/anomalies?type=orphan_unknown_outcome&tool=payments.charge");
  const crashKey = keyFor("crash", testInfo);
  await expect(row(page, crashKey, "orphan_unknown_outcome")).toBeVisible();
  // what the list itself answers for the same filter (other specs may have flagged charges too)
  const listed = (await (await page.request.get("/api/v1/anomalies?status=open&type=orphan_unknown_outcome&tool=payments.charge&limit=200")).json()) as { items: { id: string }[] };

  const [csv] = await Promise.all([page.waitForEvent("download"), page.getByTestId("export-csv").click()]);
  expect(csv.suggestedFilename()).toBe("idemgate-anomalies.csv");
  const [header, ...lines] = (await readDownload(csv)).trimEnd().split("\r\n");
  expect(header).toBe("id,type,status,tool,scope,key,detectedAt,updatedAt,summary");
  const rows = lines.map((l) => l.split(","));
  expect(rows.map((r) => r[0]).sort()).toEqual(listed.items.map((a) => a.id).sort());
  for (const r of rows) expect(r.slice(1, 4)).toEqual(["orphan_unknown_outcome", "open", "payments.charge"]);
  expect(rows.find((r) => r[5] === crashKey)?.[0]).toBe(made[testInfo.project.name]?.crash);
  expect(rows.some((r) => r[5] === keyFor("stale", testInfo))).toBe(false);

  const [jsonl] = await Promise.all([page.waitForEvent("download"), page.getByTestId("export-jsonl").click()]);
  const objects = (await readDownload(jsonl)).trimEnd().split("\n").map((l) => JSON.parse(l) as { id: string; type: string });
  expect(objects.map((o) => o.id).sort()).toEqual(listed.items.map((a) => a.id).sort());
});

async function readDownload(download: import("@playwright/test").Download): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of await download.createReadStream()) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

test("the detail shows the evidence, fixes the key, and acknowledging is audited", async ({ page }, testInfo) => {
  const { crash, crashKey } = made[testInfo.project.name] ?? {};
  test.skip(!crash || !crashKey, "needs the crash anomaly from the first test");
  await signInAsOperator(page, testInfo, `/anomalies/${crash}`);

  await expect(page.getByTestId("anomaly-type")).toHaveText("Unknown outcome");
  await expect(page.getByTestId("anomaly-status")).toHaveAttribute("data-status", "open");
  await expect(page.getByTestId("anomaly-summary")).toContainText("never reported an outcome");
  await expect(page.getByTestId("evidence-execution")).toContainText(/[0-9a-f-]{36}/);
  await expect(page.getByTestId("evidence-silent")).toContainText("past its lease without an outcome");
  await expect(page.getByTestId("evidence-key-state")).toContainText("stuck");
  await expect(page.getByTestId("evidence-key-state")).toContainText("still held by this execution");
  await expect(page.getByTestId("what-to-do")).toContainText("check the downstream system");
  await expect(page.getByTestId("key-link")).toHaveAttribute("href", keyUrl(crashKey!));
  await expect(page.getByTestId("timeline-link")).toHaveAttribute("href", `${keyUrl(crashKey!)}#timeline-heading`);

  // the raw evidence is there, folded away
  const raw = page.getByTestId("raw-evidence");
  await expect(raw.locator("pre")).toBeHidden();
  await raw.locator("summary").click();
  await expect(raw.locator("pre")).toContainText('"executionId"');
  await raw.locator("summary").click();

  // the key is still stuck: the page offers what fixes it
  await expect(page.getByTestId("key-state-now")).toHaveAttribute("data-state", "stuck");
  await expect(page.getByTestId("key-release")).toBeVisible();
  await expect(page.getByTestId("key-resolve")).toBeVisible();
  await shot(page, testInfo, "detail", true);

  // acknowledge, with a reason
  const reason = `checking the PSP dashboard for ${crashKey}`;
  await page.getByTestId("status-acknowledged").click();
  const dialog = page.getByTestId("status-dialog");
  await expect(dialog).toBeVisible();
  await expect(dialog.getByTestId("confirm-status")).toBeDisabled();
  await dialog.getByTestId("reason-input").fill(reason);
  await shot(page, testInfo, "acknowledge-dialog");
  await dialog.getByTestId("confirm-status").click();
  await expect(dialog).toBeHidden();
  await expect(page.getByTestId("anomaly-status")).toHaveAttribute("data-status", "acknowledged");
  await expect(page.getByTestId("action-notice")).toContainText("Now acknowledged");
  await expect(page.getByTestId("status-acknowledged")).toHaveCount(0);
  await expect(page.getByTestId("status-open")).toBeVisible();

  // the charge did not go through (say the PSP): release the key from here
  await page.getByTestId("key-release").click();
  const release = page.getByTestId("release-dialog");
  await release.getByTestId("reason-input").fill("PSP shows no charge for this key");
  await release.getByTestId("confirm-release").click();
  await expect(release).toBeHidden();
  await expect(page.getByTestId("key-state-now")).toHaveAttribute("data-state", "absent");
  await expect(page.getByTestId("key-release")).toHaveCount(0);

  // the key's page leads to the audit rows about it: the release
  await page.goto(keyUrl(crashKey!));
  await page.getByTestId("key-relations").getByTestId("related-audit").click();
  await expect(page.getByTestId("audit-key-filter")).toContainText(crashKey!);
  await expect(page.locator('[data-testid="audit-row"][data-action="release"]').filter({ hasText: "PSP shows no charge for this key" })).toHaveCount(1);
  await page.goto(`/anomalies/${crash}`);

  // then the anomaly is resolved; it leaves the open list
  await page.getByTestId("status-resolved").click();
  await page.getByTestId("status-dialog").getByTestId("reason-input").fill("key released after checking the PSP");
  await page.getByTestId("status-dialog").getByTestId("confirm-status").click();
  await expect(page.getByTestId("anomaly-status")).toHaveAttribute("data-status", "resolved");
  await shot(page, testInfo, "resolved");

  await page.goto("/anomalies");
  await expect(page.getByTestId("anomalies-table").or(page.getByTestId("anomalies-empty"))).toBeVisible();
  await expect(page.locator(`[data-testid="anomaly-row"][data-id="${crash}"]`)).toHaveCount(0);
  await page.getByTestId("filter-status").selectOption("resolved");
  await expect(page).toHaveURL(/status=resolved/);
  await expect(page.locator(`[data-testid="anomaly-row"][data-id="${crash}"]`)).toHaveAttribute("data-status", "resolved");

  // the operator audit trail has each step, with its reason
  await page.goto("/audit");
  const ack = page.locator('[data-testid="audit-row"][data-action="acknowledge_anomaly"]').filter({ hasText: reason });
  await expect(ack).toHaveCount(1);
  await expect(ack).toHaveAttribute("data-actor", /@/);
  await expect(page.locator('[data-testid="audit-row"][data-action="resolve_anomaly"]').filter({ hasText: "key released after checking the PSP" })).toHaveCount(1);
  await expect(page.locator('[data-testid="audit-row"][data-action="reconcile"]').first()).toBeVisible();
  await shot(page, testInfo, "audit");
});

test("an anomaly's page decides only about its own call: once another call holds the key, it points to the key's page", async ({ page, request }, testInfo) => {
  const { apiToken } = await signInAsOperator(page, testInfo, "/anomalies");
  const key = keyFor("taken", testInfo);
  expect((await charge(request, apiToken, key, `cus-taken-${RUN}`, { crash: true })).status()).toBe(500);
  await expect.poll(() => keyState(page, key), { timeout: 15_000, intervals: [1_000] }).toBe("stuck");
  await runReconciler(page);
  const id = await row(page, key, "orphan_unknown_outcome").getAttribute("data-id");
  expect(id).toBeTruthy();

  // the key is released elsewhere, and a new call with it crashes in its turn
  const released = await page.request.post(`/api/v1/keys/demo/${encodeURIComponent(key)}/release`, {
    headers: { Origin: new URL(page.url()).origin },
    data: { reason: "PSP shows no charge (e2e)" },
  });
  expect(released.status(), await released.text()).toBe(200);
  expect((await charge(request, apiToken, key, `cus-taken-${RUN}`, { crash: true })).status()).toBe(500);

  await page.goto(`/anomalies/${id}`);
  await expect(page.getByTestId("key-state-now")).toHaveAttribute("data-state", /inflight|stuck/);
  await expect(page.getByTestId("key-held-by-another")).toContainText("Another call holds this key now");
  await expect(page.getByTestId("key-release")).toHaveCount(0);
  await expect(page.getByTestId("key-resolve")).toHaveCount(0);
  await shot(page, testInfo, "key-held-by-another");
});

test("the overview's open anomaly count leads to the list", async ({ page }, testInfo) => {
  await signInAsOperator(page, testInfo);
  const open = (await (await page.request.get("/api/v1/anomalies?status=open&limit=200")).json()) as { items: unknown[] };
  const card = page.getByTestId("open-anomalies");
  await expect(card).toHaveAttribute("data-count", String(open.items.length));
  expect(open.items.length).toBeGreaterThanOrEqual(1);
  await card.click();
  await expect(page).toHaveURL(/\/anomalies$/);
  await expect(page.getByTestId("anomaly-row")).toHaveCount(open.items.length);
});

test("a viewer sees anomalies but no actions, and a forged status change is refused", async ({ page, baseURL }, testInfo) => {
  const { crash, stale } = made[testInfo.project.name] ?? {};
  test.skip(!crash || !stale, "needs the anomalies from the first tests");
  await signIn(page, VIEWER, `/anomalies/${stale}`);
  await expect(page.getByTestId("anomaly-type")).toHaveText("Stale suppression");
  await expect(page.getByTestId("stale-reasons")).toBeVisible();
  await expect(page.getByTestId("status-actions")).toHaveCount(0);
  await expect(page.getByRole("button", { name: /Acknowledge|Mark resolved|Reopen/ })).toHaveCount(0);
  await expect(page.getByTestId("read-only-note")).toBeVisible();
  await shot(page, testInfo, "viewer");

  await page.goto("/anomalies");
  await expect(page.getByTestId("anomaly-row").first()).toBeVisible();
  await expect(page.getByTestId("run-reconciler")).toHaveCount(0);

  // the same requests the console's buttons make, from the viewer's session and this origin
  const headers = { Origin: baseURL! };
  const forged = await page.request.post(`/api/v1/anomalies/${stale}/status`, { headers, data: { status: "acknowledged", reason: "forged by a viewer" } });
  expect(forged.status()).toBe(403);
  expect(((await forged.json()) as { detail: string }).detail).toContain("viewer");
  const reconcile = await page.request.post("/api/v1/anomalies/reconcile", { headers });
  expect(reconcile.status()).toBe(403);

  await page.goto(`/anomalies/${stale}`);
  await expect(page.getByTestId("anomaly-status")).toHaveAttribute("data-status", "open");
});

test("the anomaly pages work in a narrow dark window", async ({ page, consoleErrors }, testInfo) => {
  // it opens an anomaly that does not exist: a 404, which the browser logs
  consoleErrors.allow(/status of 404 \(Not Found\) \(http:\/\/[^/]+\/anomalies\/0{8}-/);
  const { crash } = made[testInfo.project.name] ?? {};
  test.skip(!crash, "needs the crash anomaly from the first test");
  await page.setViewportSize({ width: 390, height: 800 });
  await page.emulateMedia({ colorScheme: "dark" });
  await signInAsOperator(page, testInfo, "/anomalies?status=any");
  // a card per anomaly instead of a table that would hide the key and status sideways
  await expect(page.locator(`[data-testid="anomaly-card"][data-id="${crash}"]`)).toBeVisible();
  await expect(page.locator(`[data-testid="anomaly-card"][data-id="${crash}"]`)).toContainText("resolved");
  await expect(page.getByTestId("anomalies-table")).toBeHidden();
  // the table scrolls inside its box; the page itself does not scroll sideways
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
  await shot(page, testInfo, "narrow-list");

  await page.goto(`/anomalies/${crash}`);
  await expect(page.getByTestId("anomaly-type")).toBeVisible();
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
  await shot(page, testInfo, "narrow-detail");

  await page.goto("/anomalies/00000000-0000-0000-0000-000000000000");
  await expect(page.getByTestId("anomaly-not-found")).toBeVisible();
});
