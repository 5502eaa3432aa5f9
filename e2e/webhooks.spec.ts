import { expect, test, type APIRequestContext } from "./fixtures";
import { seededCredentials, signIn, signInAsOperator, VIEWER } from "./auth";
import { SCREENSHOTS } from "./screenshots";
import { WEBHOOK_SECRET, WebhookReceiver, webhookPortOf, type ReceivedEvent } from "./webhook-receiver";

// A key whose call ends without knowing its outcome, a reconciler pass started from the console, and
// the signed webhook the configuration file's endpoint (e2e/idemgate.config.yaml) receives for it;
// then the delivery log on /webhooks, with the endpoint's secret never shown. Both configurations.

const RUN = Date.now().toString(36);
const receiver = new WebhookReceiver();

test.beforeAll(async ({}, testInfo) => {
  await receiver.start(webhookPortOf(testInfo.project.name));
});
test.afterAll(() => receiver.stop());

async function unknownKey(request: APIRequestContext, token: string, key: string): Promise<void> {
  const headers = { Authorization: `Bearer ${token}`, "Idempotency-Key": key };
  const reserved = await request.post("/api/v1/tools/ledger.record/reservations", { headers, data: { arguments: { account: "acct-hook", amountCents: 1250, currency: "EUR" } } });
  expect(reserved.status(), await reserved.text()).toBe(201);
  const { executionId, token: fencing } = (await reserved.json()) as { executionId: string; token: number };
  const released = await request.post(`/api/v1/executions/${executionId}/release`, { headers: { Authorization: `Bearer ${token}` }, data: { token: fencing, outcome: "unknown", note: "the ledger timed out" } });
  expect(released.status(), await released.text()).toBe(200);
}

test("an unknown key is delivered as a signed webhook and shown in the delivery log", async ({ page, request }, testInfo) => {
  const key = `e2e-${RUN}-hook`;
  await unknownKey(request, seededCredentials(testInfo).apiToken, key);

  await signInAsOperator(page, testInfo, "/anomalies");
  await page.getByTestId("run-reconciler").click();
  await expect(page.getByTestId("reconcile-result")).toBeVisible();

  const received = (type: string) => receiver.events.find((e: ReceivedEvent) => e.type === type && e.data.key === key);
  await expect.poll(() => received("key.unknown")?.id ?? null, { timeout: 30_000 }).not.toBeNull();
  await expect.poll(() => received("anomaly.opened")?.id ?? null).not.toBeNull();
  expect(receiver.rejected).toBe(0);
  const event = received("key.unknown")!;

  await page.goto("/webhooks");
  await expect(page.getByRole("heading", { name: "Webhooks" })).toBeVisible();
  const endpoint = page.getByTestId("webhook-endpoint").filter({ hasText: "e2e-receiver" });
  await expect(endpoint).toBeVisible();
  await expect(endpoint.getByTestId("webhook-endpoint-secret")).toHaveText("••••••••");
  // the port came from the environment: masked, like the secret, which appears nowhere on the page
  await expect(endpoint.getByTestId("webhook-endpoint-url")).toHaveText("http://127.0.0.1:${E2E_WEBHOOK_PORT: ••••••}/hooks/idemgate");
  expect(await page.content()).not.toContain(WEBHOOK_SECRET);

  await page.setViewportSize({ width: 1440, height: 900 });
  const row = page.getByTestId("delivery-row").filter({ hasText: event.id });
  await expect(row).toHaveAttribute("data-status", "delivered");
  await expect(row).toContainText("key.unknown");
  await expect(row).toContainText("HTTP 200");
  await expect(row.getByRole("link", { name: key })).toHaveAttribute("href", `/keys/demo/${encodeURIComponent(key)}`);
  if (SCREENSHOTS) await page.screenshot({ path: `e2e/screenshots/webhooks-1440-${testInfo.project.name}.png`, fullPage: true, animations: "disabled" });

  await page.setViewportSize({ width: 390, height: 844 });
  const card = page.getByTestId("delivery-card").filter({ hasText: event.id });
  await expect(card).toBeVisible();
  await expect(card).toHaveAttribute("data-status", "delivered");
  await expect(row).toBeHidden();
  if (SCREENSHOTS) await page.screenshot({ path: `e2e/screenshots/webhooks-390-${testInfo.project.name}.png`, fullPage: true, animations: "disabled" });

  // nothing in an operator's header drawn over another: the role stops before Sign out begins, with
  // every section in the nav (at 1280 px and wider the header is as wide as it gets; at 1024 px its
  // links, gaps and search box are narrower)
  for (const width of [1440, 1280, 1024]) {
    await page.setViewportSize({ width, height: 800 });
    const role = await page.getByTestId("operator-role").boundingBox();
    const signOut = await page.getByTestId("sign-out").boundingBox();
    expect(role && signOut, "the role and Sign out are shown").toBeTruthy();
    expect(role!.x + role!.width, `at ${width} px`).toBeLessThanOrEqual(signOut!.x);
  }
  // and at 1024 px it has every section (API tokens too) and still fits
  await expect(page.getByRole("navigation", { name: "Console" }).getByRole("link", { name: "Webhooks" })).toBeVisible();
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(1024);
  if (SCREENSHOTS) await page.screenshot({ path: `e2e/screenshots/webhooks-1024-operator-${testInfo.project.name}.png`, animations: "disabled" });

  // filtered by status, an unknown status is said rather than ignored
  await page.setViewportSize({ width: 1440, height: 900 });
  await page.goto("/webhooks?status=failed");
  await expect(page.getByTestId("delivery-row").filter({ hasText: event.id })).toHaveCount(0);
  await page.goto("/webhooks?status=sent");
  await expect(page.getByTestId("delivery-status-unknown")).toContainText("There is no delivery status “sent”");

  // an operator sends the delivered event again: the same event id, a new attempt, a new signature
  const before = receiver.events.filter((e) => e.id === event.id).length;
  await page.goto("/webhooks");
  await row.getByTestId("redeliver").click();
  const dialog = page.getByTestId("redeliver-dialog");
  await expect(dialog).toContainText(event.id);
  await expect(dialog.getByTestId("confirm-redeliver")).toBeDisabled();
  await dialog.getByTestId("reason-input").fill("the receiver restored a backup from before this event");
  if (SCREENSHOTS) await page.screenshot({ path: `e2e/screenshots/webhooks-redeliver-${testInfo.project.name}.png`, animations: "disabled" });
  await dialog.getByTestId("confirm-redeliver").click();
  await expect(dialog).toBeHidden();
  await expect.poll(() => receiver.events.filter((e) => e.id === event.id).length, { timeout: 30_000 }).toBe(before + 1);
  expect(receiver.rejected).toBe(0);
  await expect(async () => {
    await page.reload();
    await expect(row).toHaveAttribute("data-status", "delivered", { timeout: 1_000 });
    await expect(row.locator("[data-redelivery]")).toHaveCount(1, { timeout: 1_000 });
  }).toPass({ timeout: 30_000 });
  await row.locator("summary").click();
  await expect(row.locator("[data-redelivery]")).toContainText("redelivery asked by");
});

test("a viewer reads the delivery log and the nav leads there", async ({ page }, testInfo) => {
  await signIn(page, VIEWER, "/");
  await page.setViewportSize({ width: 1440, height: 900 });
  await page.getByRole("navigation", { name: "Console" }).getByRole("link", { name: "Webhooks" }).click();
  await expect(page).toHaveURL(/\/webhooks$/);
  await expect(page.getByTestId("webhook-endpoint")).toHaveCount(1);
  expect(await page.content()).not.toContain(WEBHOOK_SECRET);
  // a viewer reads the log but sends nothing again (the API refuses the role too: lib/notifications/redeliver.test.ts)
  await expect(page.getByTestId("delivery-row").first()).toBeVisible();
  await expect(page.getByTestId("redeliver")).toHaveCount(0);
  // the narrowest window with the full nav: one more section still fits the header
  await page.setViewportSize({ width: 1024, height: 800 });
  await expect(page.getByRole("navigation", { name: "Console" }).getByRole("link", { name: "Webhooks" })).toBeVisible();
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(1024);
  // and the delivery log fits without scrolling sideways
  const log = page.getByTestId("deliveries-table");
  if ((await log.count()) > 0) expect(await log.evaluate((t) => t.parentElement!.scrollWidth <= t.parentElement!.clientWidth)).toBe(true);
  if (SCREENSHOTS) await page.screenshot({ path: `e2e/screenshots/webhooks-1024-viewer-${testInfo.project.name}.png`, animations: "disabled" });
});
