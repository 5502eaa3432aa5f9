import { randomUUID } from "node:crypto";
import { expect, test, type APIRequestContext, type Page, type TestInfo } from "./fixtures";
import { seededCredentials, signIn, signInAsOperator, VIEWER } from "./auth";
import { UpstreamService } from "./upstream-service";
import { SCREENSHOTS } from "./screenshots";

// Keys whose call ended without knowing whether its side effect happened (state `unknown`), and the
// operator's three answers to one: "It happened", "It did not happen", "Ask the tool"; and a call
// still running, which an operator may only decide with an explicit confirmation. Both server
// configurations. The upstream tools (e2e/upstream.ts) are served by UpstreamService, which counts
// the effects it applies; the demo tools count theirs in their own tables.

const RUN = Date.now().toString(36);
let seq = 0;
const newKey = (label: string) => `e2e-${RUN}-${label}-${++seq}`;
const keyUrl = (key: string) => `/keys/demo/${encodeURIComponent(key)}`;

function shot(page: Page, testInfo: TestInfo, name: string) {
  if (!SCREENSHOTS) return Promise.resolve();
  return page.screenshot({ path: `e2e/screenshots/unknown-${name}-${testInfo.project.name}.png`, fullPage: true, animations: "disabled" });
}

function invoke(request: APIRequestContext, token: string, tool: string, key: string | null, args: unknown) {
  return request.post(`/api/v1/tools/${tool}/invoke`, {
    headers: { Authorization: `Bearer ${token}`, ...(key ? { "Idempotency-Key": key } : {}) },
    data: args,
  });
}

async function problemOf(res: Awaited<ReturnType<typeof invoke>>, status: number, code: string) {
  expect(res.status(), await res.text()).toBe(status);
  const body = await res.json();
  expect(body.type).toBe(`/problems/${code}`);
  return body as { detail: string; state?: string; key?: string };
}

async function chargesOf(request: APIRequestContext, token: string, customerId: string): Promise<{ chargeId: string }[]> {
  const res = await invoke(request, token, "payments.list_charges", null, { customerId });
  expect(res.status()).toBe(200);
  return ((await res.json()) as { charges: { chargeId: string }[] }).charges;
}

async function keyDetail(page: Page, key: string) {
  const res = await page.request.get(`/api/v1/keys/demo/${encodeURIComponent(key)}`);
  expect(res.status()).toBe(200);
  return (await res.json()) as { state: string; probeable: boolean; record: { outcomeNote: string | null } | null };
}

async function apiCount(page: Page, state: string): Promise<number> {
  let n = 0;
  let cursor: string | null = null;
  do {
    const res = await page.request.get(`/api/v1/keys?state=${state}&limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    const body = (await res.json()) as { items: unknown[]; nextCursor: string | null };
    n += body.items.length;
    cursor = body.nextCursor;
  } while (cursor);
  return n;
}

const service = new UpstreamService();
test.beforeAll(({}, testInfo) => service.start(testInfo.project.name));
test.afterAll(() => service.stop());
test.describe.configure({ mode: "serial" });

test("a tool that throws after its effect leaves the key unknown: counted, listed and explained; Ask the tool resolves it", async ({ page, request }, testInfo) => {
  const { apiToken } = await signInAsOperator(page, testInfo);
  // a key as long as a caller's UUID makes: the list still shows the whole row (below)
  const key = newKey(`throw-${randomUUID()}`);
  const customer = `cus-unknown-${RUN}`;
  // simulate is part of the arguments: a retry sends the same ones (it is held, so it does not throw again)
  const args = { customerId: customer, amountCents: 2500, currency: "EUR", simulate: { outcome: "throw_after_effect" } };

  const first = await problemOf(await invoke(request, apiToken, "payments.charge", key, args), 502, "outcome_unknown");
  expect(first.state).toBe("unknown");
  // the retry is held: the charge happened once and does not happen again
  await problemOf(await invoke(request, apiToken, "payments.charge", key, args), 409, "outcome_unknown");
  expect(await chargesOf(request, apiToken, customer)).toHaveLength(1);

  await expect(async () => {
    await page.goto("/");
    expect(Number(await page.getByTestId("count-unknown").getAttribute("data-count"))).toBe(await apiCount(page, "unknown"));
  }).toPass({ timeout: 15_000 });
  expect(Number(await page.getByTestId("count-unknown").getAttribute("data-count"))).toBeGreaterThanOrEqual(1);
  await shot(page, testInfo, "overview");
  await page.getByTestId("count-unknown").click();
  await expect(page).toHaveURL(/\/keys\?state=unknown$/);
  await expect(page.getByTestId("filter-state")).toHaveValue("unknown");

  await page.getByTestId("filter-prefix").fill(key);
  await expect(page).toHaveURL(new RegExp(`prefix=${key}`));
  const row = page.locator(`[data-testid="key-row"][data-key="${key}"]`);
  await expect(row).toHaveAttribute("data-state", "unknown");
  await expect(row.getByTestId("row-outcome-note")).toContainText("simulated exception after the side effect");
  // a desktop window shows the whole row, the outcome note in the last column too: the table fits its
  // frame (measured on the filtered list, this row alone)
  await expect(page.getByTestId("key-row")).toHaveCount(1);
  await expect(page.getByTestId("keys-table")).not.toHaveAttribute("aria-busy", "true");
  for (const width of [1024, 1440]) {
    await page.setViewportSize({ width, height: 900 });
    const fit = await page.getByTestId("keys-table").evaluate((t) => ({ table: t.scrollWidth, frame: t.parentElement!.clientWidth }));
    expect(fit.table, `at ${width} px`).toBeLessThanOrEqual(fit.frame);
  }
  await shot(page, testInfo, "list");

  await row.getByRole("link", { name: key }).click();
  await expect(page.getByTestId("key-state")).toHaveText("unknown");
  const why = page.getByTestId("unknown-explanation");
  await expect(why).toContainText("may have happened");
  await expect(why).toContainText("will not run again by itself");
  await expect(page.getByTestId("outcome-note")).toContainText("simulated exception after the side effect");
  await expect(page.getByTestId("key-record")).toContainText("Unknown since");
  await expect(page.getByTestId("timeline").locator('[data-type="outcome"]')).toContainText("unknown (it may have happened)");
  await expect(page.getByTestId("release-button")).toHaveText("It did not happen");
  await expect(page.getByTestId("resolve-button")).toHaveText("It happened");
  await shot(page, testInfo, "key");
  await page.emulateMedia({ colorScheme: "dark" });
  await shot(page, testInfo, "key-dark");
  await page.emulateMedia({ colorScheme: "light" });

  // the demo tools answer from their own tables: the charge exists, so the key is resolved with it
  await page.getByTestId("probe-button").click();
  const answer = page.getByTestId("probe-answer");
  await expect(answer).toHaveAttribute("data-outcome", "applied");
  await expect(answer).toHaveAttribute("data-action", "resolved");
  await expect(answer).toContainText("it happened");
  await expect(page.getByTestId("key-state")).toHaveText("done");
  const [charge] = await chargesOf(request, apiToken, customer);
  await expect(page.getByTestId("key-result")).toContainText(charge.chargeId);
  // the timeline keeps the call's own unknown outcome; the probe's decision is an action, not a second outcome
  const timeline = page.getByTestId("timeline");
  await expect(timeline.locator('[data-type="outcome"]')).toHaveCount(1);
  await expect(timeline.locator('[data-type="outcome"]')).toContainText("unknown (it may have happened)");
  await expect(timeline.locator('[data-type="operator"]')).toContainText(/resolve by/i);
  // and the page's links follow the decision: the audit row it left
  await expect(page.getByTestId("related-audit")).toContainText("1 operator action on this key");
  await shot(page, testInfo, "probed");

  const replay = await invoke(request, apiToken, "payments.charge", key, args);
  expect(replay.status()).toBe(200);
  expect(replay.headers()["idempotent-replayed"]).toBe("true");
  expect((await replay.json()).chargeId).toBe(charge.chargeId);
  expect(await chargesOf(request, apiToken, customer)).toHaveLength(1);
});

test("It did not happen: an unknown key of a service that answered 503 is released, and the next call runs once", async ({ page, request }, testInfo) => {
  const { apiToken } = await signInAsOperator(page, testInfo);
  const key = newKey("released");
  service.behaviour = "fail";
  await problemOf(await invoke(request, apiToken, "billing.create_invoice", key, { customer: "c-release" }), 502, "outcome_unknown");
  service.behaviour = "ok";
  await problemOf(await invoke(request, apiToken, "billing.create_invoice", key, { customer: "c-release" }), 409, "outcome_unknown");
  expect(service.effectsOf(key)).toBe(0);
  expect(await keyDetail(page, key)).toMatchObject({ state: "unknown", probeable: false, record: { outcomeNote: "the service answered 503" } });

  await page.goto(keyUrl(key));
  await expect(page.getByTestId("key-state")).toHaveText("unknown");
  await expect(page.getByTestId("outcome-note")).toHaveText("the service answered 503");
  // this tool has no status probe: nothing to ask, and the page says so
  await expect(page.getByTestId("probe-button")).toHaveCount(0);
  await expect(page.getByTestId("unknown-explanation")).toContainText("This tool cannot be asked");

  await page.getByTestId("release-button").click();
  const dialog = page.getByTestId("release-dialog");
  await expect(dialog).toContainText("It did not happen");
  // no running call here: nothing to confirm beyond the reason
  await expect(dialog.getByTestId("force-field")).toHaveCount(0);
  await dialog.getByTestId("reason-input").fill("the billing service's log shows no invoice for this key (e2e)");
  await dialog.getByTestId("confirm-release").click();
  await expect(dialog).toBeHidden();
  await expect(page.getByTestId("key-state")).toHaveText("absent");
  await expect(page.getByTestId("timeline").locator('[data-type="operator"]')).toContainText("unknown → absent");

  const next = await invoke(request, apiToken, "billing.create_invoice", key, { customer: "c-release" });
  expect(next.status()).toBe(201);
  const again = await invoke(request, apiToken, "billing.create_invoice", key, { customer: "c-release" });
  expect(again.headers()["idempotent-replayed"]).toBe("true");
  expect(service.effectsOf(key)).toBe(1);
  await page.reload();
  await expect(page.getByTestId("key-state")).toHaveText("done");
});

test("a decision made on a page read before another call took the key is refused: the call holding it now stays held", async ({ page, request, consoleErrors }, testInfo) => {
  // the refused release answers 409, which the browser logs
  consoleErrors.allow(/status of 409 \(Conflict\) \(http:\/\/[^/]+\/api\/v1\/keys\/[^ ]+\/release:/);
  const { apiToken } = await signInAsOperator(page, testInfo);
  const key = newKey("changed");
  const origin = new URL(page.url()).origin;
  const detailUrl = `/api/v1/keys/demo/${encodeURIComponent(key)}`;
  type Detail = { state: string; record: { token: number; executionId: string } };
  const read = async () => (await (await page.request.get(detailUrl)).json()) as Detail;
  service.behaviour = "fail";
  await problemOf(await invoke(request, apiToken, "billing.create_invoice", key, { customer: "c-changed" }), 502, "outcome_unknown");
  const first = await read();

  // this operator opens the key and starts to release it
  await page.goto(keyUrl(key));
  await expect(page.getByTestId("key-state")).toHaveText("unknown");
  await page.getByTestId("release-button").click();
  const dialog = page.getByTestId("release-dialog");
  await dialog.getByTestId("reason-input").fill("the billing service's log shows no invoice (e2e, decided about the first call)");

  // meanwhile another operator releases it, and the next call's outcome is unknown too
  const released = await page.request.post(`${detailUrl}/release`, {
    headers: { Origin: origin },
    data: { reason: "another operator: no invoice for the first call (e2e)", token: first.record.token },
  });
  expect(released.status(), await released.text()).toBe(200);
  await problemOf(await invoke(request, apiToken, "billing.create_invoice", key, { customer: "c-changed" }), 502, "outcome_unknown");
  const second = await read();
  expect(second.state).toBe("unknown");
  expect(second.record.token).not.toBe(first.record.token);

  // the API refuses a decision about the first call now, and says why
  const stale = await page.request.post(`${detailUrl}/release`, { headers: { Origin: origin }, data: { reason: "about the first call (e2e)", token: first.record.token } });
  expect(stale.status()).toBe(409);
  expect(await stale.json()).toMatchObject({ type: "/problems/invalid_state", detail: expect.stringContaining("another call holds this key now") });

  // the page behind the dialog re-reads the key and shows the second call; the dialog still decides about the first
  await expect(page.getByTestId("key-record")).toContainText(second.record.executionId, { timeout: 15_000 });
  await dialog.getByTestId("confirm-release").click();
  await expect(dialog.getByRole("alert")).toContainText("another call holds this key now");
  await shot(page, testInfo, "release-changed");
  expect(await read()).toMatchObject({ state: "unknown", record: { token: second.record.token, executionId: second.record.executionId } });
  service.behaviour = "ok";
  await problemOf(await invoke(request, apiToken, "billing.create_invoice", key, { customer: "c-changed" }), 409, "outcome_unknown");
});

test("It happened: an unknown key is resolved with the operator's result, and a retry replays it", async ({ page, request }, testInfo) => {
  const { apiToken } = await signInAsOperator(page, testInfo);
  const key = newKey("resolved");
  service.behaviour = "fail_after_effect";
  await problemOf(await invoke(request, apiToken, "billing.create_invoice", key, { customer: "c-resolve" }), 502, "outcome_unknown");
  service.behaviour = "ok";
  expect(service.effectsOf(key)).toBe(1);

  await page.goto(keyUrl(key));
  await expect(page.getByTestId("key-state")).toHaveText("unknown");
  await page.getByTestId("resolve-button").click();
  const dialog = page.getByTestId("resolve-dialog");
  await expect(dialog).toContainText("It happened");
  await dialog.getByTestId("reason-input").fill("invoice inv_manual found in the billing service (e2e)");
  await dialog.getByTestId("result-input").fill('{ "id": "inv_manual" }');
  await dialog.getByTestId("status-input").fill("201");
  await shot(page, testInfo, "resolve-dialog");
  await dialog.getByTestId("confirm-resolve").click();
  await expect(dialog).toBeHidden();
  await expect(page.getByTestId("key-state")).toHaveText("done");
  await expect(page.getByTestId("key-result")).toContainText("inv_manual");
  await expect(page.getByTestId("timeline").locator('[data-type="operator"]')).toContainText("unknown → done");

  const retry = await invoke(request, apiToken, "billing.create_invoice", key, { customer: "c-resolve" });
  expect(retry.status()).toBe(201);
  expect(retry.headers()["idempotent-replayed"]).toBe("true");
  expect(await retry.json()).toEqual({ id: "inv_manual" });
  expect(service.effectsOf(key)).toBe(1);
});

test("Ask the tool through its status URL: not applied releases the key; a service that cannot tell leaves it held", async ({ page, request }, testInfo) => {
  const { apiToken } = await signInAsOperator(page, testInfo);
  const key = newKey("probe-released");
  service.behaviour = "fail";
  await problemOf(await invoke(request, apiToken, "billing.export_ledger", key, { month: "2026-10" }), 502, "outcome_unknown");
  service.behaviour = "ok";
  expect(await keyDetail(page, key)).toMatchObject({ state: "unknown", probeable: true });

  await page.goto(keyUrl(key));
  await page.getByTestId("probe-button").click();
  await expect(page.getByTestId("probe-answer")).toHaveAttribute("data-outcome", "not_applied");
  await expect(page.getByTestId("probe-answer")).toContainText("it did not happen");
  await expect(page.getByTestId("key-state")).toHaveText("absent");
  expect((await invoke(request, apiToken, "billing.export_ledger", key, { month: "2026-10" })).status()).toBe(201);
  expect(service.effectsOf(key)).toBe(1);

  const held = newKey("probe-unknown");
  service.behaviour = "fail_after_effect";
  await problemOf(await invoke(request, apiToken, "billing.export_ledger", held, { month: "2026-11" }), 502, "outcome_unknown");
  service.behaviour = "ok";
  service.statusAnswers = "unknown";
  try {
    await page.goto(keyUrl(held));
    await page.getByTestId("probe-button").click();
    await expect(page.getByTestId("probe-answer")).toHaveAttribute("data-outcome", "unknown");
    await expect(page.getByTestId("probe-answer")).toContainText("cannot tell");
    await expect(page.getByTestId("key-state")).toHaveText("unknown");
    await shot(page, testInfo, "probe-cannot-tell");
  } finally {
    service.statusAnswers = "truth";
  }
  expect(service.effectsOf(held)).toBe(1);
});

test("a call still running is released only with the checkbox; its late result is flagged", async ({ page, request }, testInfo) => {
  const { apiToken } = await signInAsOperator(page, testInfo);
  const key = newKey("running");
  service.behaviour = "hold";
  const received = service.received;
  const running = invoke(request, apiToken, "billing.export_ledger", key, { month: "2026-12" });
  await expect.poll(() => service.received).toBe(received + 1);
  service.behaviour = "ok";

  await page.goto(keyUrl(key));
  await expect(page.getByTestId("key-state")).toHaveText("inflight");
  await expect(page.getByTestId("running-explanation")).toContainText("it may still complete");
  // a running call is not asked about: it answers for itself
  await expect(page.getByTestId("probe-button")).toHaveCount(0);

  // the API refuses without force, and says why
  const origin = new URL(page.url()).origin;
  const refused = await page.request.post(`/api/v1/keys/demo/${encodeURIComponent(key)}/release`, { headers: { Origin: origin }, data: { reason: "no force (e2e)" } });
  expect(refused.status()).toBe(409);
  const problem = await refused.json();
  expect(problem.type).toBe("/problems/invalid_state");
  expect(problem.detail).toContain("still running");

  await page.getByTestId("release-button").click();
  const dialog = page.getByTestId("release-dialog");
  await dialog.getByTestId("reason-input").fill("the export job was cancelled by hand (e2e)");
  await expect(dialog.getByTestId("force-field")).toContainText("The call may still be running: release anyway (its late result will be flagged)");
  await expect(dialog.getByTestId("confirm-release")).toBeDisabled();
  await shot(page, testInfo, "release-running");
  await dialog.getByTestId("force-input").check();
  await expect(dialog.getByTestId("confirm-release")).toBeEnabled();
  await dialog.getByTestId("confirm-release").click();
  await expect(dialog).toBeHidden();
  await expect(page.getByTestId("key-state")).toHaveText("absent");

  // the call completes after all: the caller gets its result, and the log flags it as late
  service.answerHeld();
  expect((await running).status()).toBe(201);
  await expect(async () => {
    await page.reload();
    await expect(page.getByTestId("timeline").locator('[data-type="outcome"]')).toContainText("late completion", { timeout: 1_000 });
  }).toPass({ timeout: 10_000 });
  expect(service.effectsOf(key)).toBe(1);
});

test("bulk release of every unknown key matching a filter; a running call cannot be selected", async ({ page, request }, testInfo) => {
  const { apiToken } = await signInAsOperator(page, testInfo);
  const prefix = `e2e-${RUN}-bulk-unknown-`;
  service.behaviour = "fail";
  for (const k of ["a", "b"]) await problemOf(await invoke(request, apiToken, "billing.create_invoice", `${prefix}${k}`, { customer: "c-bulk" }), 502, "outcome_unknown");
  service.behaviour = "hold";
  const received = service.received;
  const running = invoke(request, apiToken, "billing.export_ledger", `${prefix}running`, { month: "2027-01" });
  await expect.poll(() => service.received).toBe(received + 1);
  service.behaviour = "ok";

  try {
    await page.goto(`/keys?prefix=${encodeURIComponent(prefix)}`);
    await expect(page.getByTestId("key-row")).toHaveCount(3);
    await expect(page.locator(`[data-testid="key-row"][data-key="${prefix}running"]`).getByTestId("row-select")).toHaveCount(0);
    await expect(page.locator(`[data-testid="key-row"][data-key="${prefix}a"]`).getByTestId("row-select")).toBeVisible();

    await page.getByTestId("filter-state").selectOption("unknown");
    await expect(page).toHaveURL(/state=unknown/);
    await expect(page.getByTestId("key-row")).toHaveCount(2);
    await expect(page.getByTestId("release-all-held")).toHaveText("Release all unknown keys matching this filter");
    await page.getByTestId("release-all-held").click();
    const dialog = page.getByTestId("bulk-release-dialog");
    await expect(dialog.getByTestId("bulk-release-count")).toHaveText("2 unknown keys");
    await dialog.getByTestId("reason-input").fill("the billing service was down: none of these invoices exist (e2e)");
    await shot(page, testInfo, "bulk-release");
    await dialog.getByTestId("confirm-release").click();
    await expect(page.getByTestId("bulk-released")).toHaveText("2");
    await expect(page.getByTestId("keys-empty")).toBeVisible();
    expect((await keyDetail(page, `${prefix}running`)).state).toBe("inflight");
  } finally {
    service.answerHeld();
  }
  expect((await running).status()).toBe(201);
});

test("a viewer sees an unknown key and why, but no actions", async ({ page, request }, testInfo) => {
  const { apiToken } = seededCredentials(testInfo);
  const key = newKey("viewer");
  await problemOf(
    await invoke(request, apiToken, "payments.charge", key, { customerId: `cus-viewer-${RUN}`, amountCents: 100, currency: "EUR", simulate: { outcome: "throw_after_effect" } }),
    502,
    "outcome_unknown",
  );
  await signIn(page, VIEWER);
  await page.goto(keyUrl(key));
  await expect(page.getByTestId("key-state")).toHaveText("unknown");
  await expect(page.getByTestId("outcome-note")).toBeVisible();
  await expect(page.getByTestId("key-actions")).toHaveCount(0);
  await expect(page.getByTestId("probe-button")).toHaveCount(0);
});
