import { expect, test, type APIRequestContext, type Page, type TestInfo } from "./fixtures";
import { signInAsOperator } from "./auth";
import { SCREENSHOTS } from "./screenshots";
import { UpstreamService } from "./upstream-service";

// What an operator deciding "did it happen?" sees of an unknown call (DESIGN.md § Arguments kept for
// operators): its arguments, redacted, on the key page, in its timeline and in its anomaly's
// evidence; "It happened" filled in from the service's last answer; and nothing of it through
// another tenant's token. Both server configurations.

const RUN = Date.now().toString(36);
const keyUrl = (key: string) => `/keys/demo/${encodeURIComponent(key)}`;
const CARD = "4242424242424242";

async function shot(page: Page, testInfo: TestInfo, name: string) {
  if (!SCREENSHOTS) return;
  for (const width of [1440, 390]) {
    await page.setViewportSize({ width, height: 900 });
    // the sticky header stays where the page was scrolled to in a full-page picture
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: `e2e/screenshots/arguments-${name}-${width}-${testInfo.project.name}.png`, fullPage: true, animations: "disabled" });
  }
  await page.setViewportSize({ width: 1440, height: 900 });
}

function invoke(request: APIRequestContext, token: string, tool: string, key: string, args: unknown) {
  return request.post(`/api/v1/tools/${tool}/invoke`, { headers: { Authorization: `Bearer ${token}`, "Idempotency-Key": key }, data: args });
}

const service = new UpstreamService();
test.beforeAll(({}, testInfo) => service.start(testInfo.project.name));
test.afterAll(() => service.stop());
test.describe.configure({ mode: "serial" });

test("an unknown invoice: its arguments (redacted) on the key page and in its anomaly; It happened starts from the service's answer @both-stores", async ({ page, request, context }, testInfo) => {
  await context.grantPermissions(["clipboard-read", "clipboard-write"]);
  const { apiToken } = await signInAsOperator(page, testInfo);
  const key = `e2e-${RUN}-args-invoice`;
  const customerId = `cus_args_${RUN}`;
  const args = { customer: customerId, amountCents: 4200, card: { number: CARD, cvc: "123" }, memo: "March retainer" };

  service.behaviour = "pending_after_effect";
  const first = await invoke(request, apiToken, "billing.create_invoice", key, args);
  service.behaviour = "ok";
  expect(first.status(), await first.text()).toBe(502);
  expect(service.effectsOf(key)).toBe(1);

  await page.goto(keyUrl(key));
  await expect(page.getByTestId("key-state")).toHaveText("unknown");
  const shown = page.getByTestId("key-arguments");
  await expect(shown).toHaveAttribute("data-kept", "redacted");
  const json = page.getByTestId("key-arguments-json");
  await expect(json).toContainText(`"customer": "${customerId}"`);
  await expect(json).toContainText('"memo": "March retainer"');
  await expect(json).toContainText('"number": "[redacted]"');
  await expect(json).toContainText('"cvc": "[redacted]"');
  await expect(page.locator("body")).not.toContainText(CARD);
  await shown.getByRole("button", { name: "Copy JSON" }).click();
  await expect(shown.getByRole("button", { name: "Copied" })).toBeVisible();
  expect(JSON.parse(await page.evaluate(() => navigator.clipboard.readText()))).toMatchObject({ customer: customerId, card: { number: "[redacted]" } });

  // the timeline keeps each execution's arguments, folded
  const inTimeline = page.getByTestId("timeline-arguments").first();
  await inTimeline.locator("summary").click();
  await expect(inTimeline).toContainText(customerId);
  await shot(page, testInfo, "key");

  // the reconciler flags it; its evidence shows the call's arguments too
  await page.goto("/anomalies");
  await page.getByTestId("run-reconciler").click();
  await expect(page.getByTestId("reconcile-result")).toBeVisible();
  const list = await page.request.get(`/api/v1/anomalies?type=orphan_unknown_outcome&tool=billing.create_invoice&limit=200`);
  const anomaly = ((await list.json()) as { items: { id: string; key: string | null }[] }).items.find((a) => a.key === key);
  expect(anomaly, "an anomaly for the unknown invoice").toBeTruthy();
  await page.goto(`/anomalies/${anomaly!.id}`);
  const evidence = page.getByTestId("evidence-arguments-call");
  await expect(evidence).toContainText(customerId);
  await expect(evidence).toContainText("[redacted]");
  await expect(page.locator("body")).not.toContainText(CARD);
  await shot(page, testInfo, "anomaly");

  // It happened: the form starts from what the service said (its 502 named the invoice)
  await page.goto(keyUrl(key));
  await page.getByTestId("resolve-button").click();
  const dialog = page.getByTestId("resolve-dialog");
  await expect(dialog.getByTestId("result-prefill")).toHaveAttribute("data-source", "upstream");
  await expect(dialog.getByTestId("result-prefill")).toContainText("502");
  const prefilled = JSON.parse(await dialog.getByTestId("result-input").inputValue()) as { id: string; status: string };
  expect(prefilled).toEqual({ id: expect.stringMatching(/^inv_\d+$/), status: "pending" });
  // a 502 is no result status: the operator says which one
  await expect(dialog.getByTestId("status-input")).toHaveValue("");
  await shot(page, testInfo, "resolve-prefilled");
  await dialog.getByTestId("result-input").fill(JSON.stringify({ id: prefilled.id }));
  await dialog.getByTestId("status-input").fill("201");
  await dialog.getByTestId("reason-input").fill("the invoice exists in the billing service (e2e)");
  await dialog.getByTestId("confirm-resolve").click();
  await expect(dialog).toBeHidden();
  await expect(page.getByTestId("key-state")).toHaveText("done");

  const retry = await invoke(request, apiToken, "billing.create_invoice", key, args);
  expect(retry.status()).toBe(201);
  expect(await retry.json()).toEqual({ id: prefilled.id });
  expect(service.effectsOf(key)).toBe(1);
});

test("another tenant's token gets nothing of the call; each tenant's own token sees its own arguments, redacted @both-stores", async ({ page, request }, testInfo) => {
  const { apiToken } = await signInAsOperator(page, testInfo);
  await page.goto("/");
  const otherScope = `e2e-other-${RUN}`;
  const created = await page.request.post("/api/v1/tokens", { data: { scope: otherScope, label: "arguments e2e" }, headers: { origin: new URL(page.url()).origin } });
  expect(created.status(), await created.text()).toBe(201);
  const otherToken = ((await created.json()) as { token: string }).token;

  // one key string, two tenants, two calls
  const key = `e2e-${RUN}-args-tenants`;
  const ours = `cus_ours_${RUN}`;
  const theirs = `cus_theirs_${RUN}`;
  expect((await invoke(request, apiToken, "billing.create_invoice", key, { customer: ours, password: "p4ss-ours" })).status()).toBe(201);
  expect((await invoke(request, otherToken, "billing.create_invoice", key, { customer: theirs })).status()).toBe(201);

  const read = (scope: string, token: string) => request.get(`/api/v1/keys/${scope}/${encodeURIComponent(key)}`, { headers: { Authorization: `Bearer ${token}` } });
  const own = await read("demo", apiToken);
  expect(own.status()).toBe(200);
  const ownText = await own.text();
  expect(JSON.parse(ownText)).toMatchObject({ arguments: { value: { customer: ours, password: "[redacted]" }, kept: "redacted" } });
  expect(ownText).not.toContain(theirs);
  expect(ownText).not.toContain("p4ss-ours");

  const crossed = await read("demo", otherToken);
  expect(crossed.status()).toBe(403);
  expect(await crossed.text()).not.toContain(ours);
  const theirsRead = await read(otherScope, otherToken);
  expect(theirsRead.status()).toBe(200);
  const theirsText = await theirsRead.text();
  expect(JSON.parse(theirsText)).toMatchObject({ arguments: { value: { customer: theirs } } });
  expect(theirsText).not.toContain(ours);
});
