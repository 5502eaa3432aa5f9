import { expect, test, type APIRequestContext, type Page, type TestInfo } from "./fixtures";
import { signIn, signInAsOperator, VIEWER } from "./auth";
import { SCREENSHOTS } from "./screenshots";

// Saved views (docs/operate.md § Saved views): an operator saves the Keys and Anomalies filters
// under a name, picks one to apply it through the URL, deletes it; another operator never sees it.

const RUN = Date.now().toString(36);

async function shot(page: Page, testInfo: TestInfo, name: string) {
  if (!SCREENSHOTS) return;
  await page.screenshot({ path: `e2e/screenshots/saved-views-${name}-${testInfo.project.name}.png`, fullPage: true, animations: "disabled" });
}

function charge(request: APIRequestContext, token: string, key: string, crash = false) {
  return request.post("/api/v1/tools/payments.charge/invoke", {
    headers: { Authorization: `Bearer ${token}`, "Idempotency-Key": key },
    data: { customerId: `cus_${key}`, amountCents: 1500, currency: "EUR", ...(crash ? { simulate: { outcome: "crash_after_effect" } } : {}) },
  });
}

async function saveView(page: Page, name: string) {
  await page.getByTestId("views-button").click();
  await page.getByTestId("save-view").click();
  await expect(page.getByTestId("save-view-dialog")).toBeVisible();
  await page.getByTestId("view-name").fill(name);
  await page.getByTestId("confirm-save-view").click();
}

async function pickView(page: Page, name: string) {
  await page.getByTestId("views-button").click();
  await page.getByTestId("views-menu").getByRole("link", { name }).click();
  await expect(page.getByTestId("views-menu")).toHaveCount(0);
}

const keyRow = (page: Page, key: string) => page.locator(`[data-testid="key-row"][data-key="${key}"]`);

/** the id of one of the signed-in operator's views, by page and name */
async function viewId(page: Page, viewPage: string, name: string): Promise<string> {
  const { views } = (await (await page.request.get(`/api/v1/console/views?page=${viewPage}`)).json()) as { views: { id: string; name: string }[] };
  return views.find((v) => v.name === name)!.id;
}

/**
 * Deletes the signed-in operator's views on both pages: a retry of this serial group starts as its
 * first attempt did, not with the views that attempt saved under its own run's names.
 */
async function deleteOwnViews(page: Page) {
  const origin = new URL(page.url()).origin;
  for (const viewPage of ["keys", "anomalies"]) {
    const { views } = (await (await page.request.get(`/api/v1/console/views?page=${viewPage}`)).json()) as { views: { id: string }[] };
    for (const view of views) expect((await page.request.delete(`/api/v1/console/views/${view.id}`, { headers: { origin } })).status()).toBe(200);
  }
}

test.describe.configure({ mode: "serial" });

const done = `sv-${RUN}-done`;
const crashed = `sv-${RUN}-crash`;
const keysView = `Done charges ${RUN}`;
const anomaliesView = `Unknown charges ${RUN}`;

test("an operator saves the Keys filter as a view, and picking it applies the filter again", async ({ page, request, consoleErrors }, testInfo) => {
  // the blank and the duplicate name below are refused on purpose
  consoleErrors.allow(/status of (400|409) .*\/api\/v1\/console\/views/);
  const { apiToken } = await signInAsOperator(page, testInfo, "/keys");
  await deleteOwnViews(page);
  await page.reload();
  expect((await charge(request, apiToken, done)).status()).toBe(200);
  expect((await charge(request, apiToken, crashed, true)).status()).toBe(500);

  await page.getByTestId("filter-state").selectOption("done");
  await page.getByTestId("filter-prefix").fill(`sv-${RUN}-`);
  await expect(page).toHaveURL(new RegExp(`prefix=sv-${RUN}-`));
  await expect(keyRow(page, done)).toBeVisible();
  await expect(keyRow(page, crashed)).toHaveCount(0);

  // an empty menu says how to fill it; Escape closes it and gives the focus back
  await page.getByTestId("views-button").click();
  await expect(page.getByTestId("views-empty")).toBeVisible();
  await page.keyboard.press("Escape");
  await expect(page.getByTestId("views-menu")).toHaveCount(0);
  await expect(page.getByTestId("views-button")).toBeFocused();

  // a blank name is refused with a readable message and nothing is saved
  await saveView(page, "   ");
  await expect(page.getByTestId("save-view-error")).toContainText("a name needs at least one character");
  await page.getByTestId("view-name").fill(keysView);
  await page.getByTestId("confirm-save-view").click();
  await expect(page.getByTestId("save-view-dialog")).toHaveCount(0);
  await expect(page.getByTestId("views-notice")).toHaveText(`Saved view ${keysView}`);

  // the same name again: 409, said in the dialog
  await saveView(page, keysView);
  await expect(page.getByTestId("save-view-error")).toContainText(`you already have a view named "${keysView}"`);
  await page.getByRole("button", { name: "Cancel" }).click();

  await page.getByTestId("filter-clear").click();
  await expect(page).toHaveURL(/\/keys$/);
  await expect(keyRow(page, crashed)).toBeVisible();

  await pickView(page, keysView);
  await expect(page).toHaveURL(new RegExp(`/keys\\?state=done&prefix=sv-${RUN}-$`));
  await expect(page.getByTestId("filter-state")).toHaveValue("done");
  await expect(page.getByTestId("filter-prefix")).toHaveValue(`sv-${RUN}-`);
  await expect(keyRow(page, done)).toBeVisible();
  await expect(keyRow(page, crashed)).toHaveCount(0);

  // keyboard only: open the menu, tab to the view, Enter
  await page.getByTestId("filter-clear").click();
  await expect(page).toHaveURL(/\/keys$/);
  await page.getByTestId("views-button").focus();
  await page.keyboard.press("Enter");
  await expect(page.getByTestId("saved-view-link")).toHaveCount(1);
  await page.keyboard.press("Tab");
  await expect(page.getByTestId("saved-view-link")).toBeFocused();
  await page.keyboard.press("Enter");
  await expect(page).toHaveURL(/state=done/);
  await expect(keyRow(page, crashed)).toHaveCount(0);
  await expect(page.getByTestId("views-button")).toBeVisible();

  for (const size of [
    { width: 1440, height: 900 },
    { width: 390, height: 844 },
  ]) {
    await page.setViewportSize(size);
    await page.getByTestId("views-button").click();
    const menu = page.getByTestId("views-menu");
    await expect(menu.getByRole("link", { name: keysView })).toHaveAttribute("aria-current", "true");
    // the menu stays inside the window
    const box = (await menu.boundingBox())!;
    expect(box.x).toBeGreaterThanOrEqual(0);
    expect(box.x + box.width).toBeLessThanOrEqual(size.width);
    await shot(page, testInfo, `keys-menu-${size.width}`);
    await page.keyboard.press("Escape");
  }
  await page.setViewportSize({ width: 1440, height: 900 });
});

test("the same on Anomalies, and a view is deleted after a confirmation", async ({ page }, testInfo) => {
  await signInAsOperator(page, testInfo, "/keys");
  // the crashed charge's lease (3 s) passes, then a reconciler pass flags it
  await expect.poll(async () => ((await (await page.request.get(`/api/v1/keys/demo/${crashed}`)).json()) as { state: string }).state, { timeout: 15_000 }).toBe("stuck");
  await page.goto("/anomalies");
  await page.getByTestId("run-reconciler").click();
  await expect(page.getByTestId("reconcile-result")).toBeVisible();

  await page.getByTestId("filter-status").selectOption("any");
  await page.getByTestId("filter-type").selectOption("orphan_unknown_outcome");
  await page.getByTestId("filter-tool").selectOption("payments.charge");
  await expect(page).toHaveURL(/tool=payments\.charge/);
  const row = page.locator(`[data-testid="anomaly-row"][data-key="${crashed}"]`);
  await expect(row).toBeVisible();
  // the list the menu reads as it opens is answered before the save but arrives after it: it must
  // not stand as the list once the view is saved
  let deliver!: () => void;
  const delivered = new Promise<void>((resolve) => (deliver = resolve));
  await page.route(
    /\/api\/v1\/console\/views\?page=anomalies$/,
    async (route) => {
      const before = await route.fetch();
      await delivered;
      await route.fulfill({ response: before }).catch(() => {});
    },
    { times: 1 },
  );
  await saveView(page, anomaliesView);
  await expect(page.getByTestId("save-view-dialog")).toHaveCount(0);
  await expect(page.getByTestId("views-notice")).toHaveText(`Saved view ${anomaliesView}`);
  deliver();

  // the Keys view is not on this page's list
  await page.getByTestId("views-button").click();
  await expect(page.getByTestId("saved-view")).toHaveCount(1);
  await page.keyboard.press("Escape");

  await page.getByTestId("filter-type").selectOption("stale_suppression");
  await expect(row).toHaveCount(0);
  await pickView(page, anomaliesView);
  await expect(page).toHaveURL(/\/anomalies\?status=any&type=orphan_unknown_outcome&tool=payments\.charge$/);
  await expect(page.getByTestId("filter-status")).toHaveValue("any");
  await expect(page.getByTestId("filter-type")).toHaveValue("orphan_unknown_outcome");
  await expect(row).toBeVisible();
  await page.getByTestId("views-button").click();
  await shot(page, testInfo, "anomalies-menu-1440");

  await page.getByRole("button", { name: `Delete view ${anomaliesView}` }).click();
  await expect(page.getByTestId("delete-view-dialog")).toContainText(`Delete view “${anomaliesView}”?`);
  await shot(page, testInfo, "delete-dialog-1440");
  await page.getByTestId("confirm-delete-view").click();
  await expect(page.getByTestId("delete-view-dialog")).toHaveCount(0);
  await expect(page.getByTestId("views-notice")).toHaveText(`Deleted view ${anomaliesView}`);
  await page.getByTestId("views-button").click();
  await expect(page.getByTestId("views-empty")).toBeVisible();
});

test("the API: bad input is a problem naming the field; API tokens are refused", async ({ page, request }, testInfo) => {
  const { apiToken } = await signInAsOperator(page, testInfo, "/keys");
  const origin = new URL(page.url()).origin;
  const bad = await page.request.post("/api/v1/console/views", { headers: { origin }, data: { page: "keys", name: "typo", query: "state=stuk" } });
  expect(bad.status()).toBe(400);
  expect(bad.headers()["content-type"]).toContain("application/problem+json");
  expect(((await bad.json()) as { errors: { path: string }[] }).errors.map((e) => e.path)).toEqual(["query.state"]);
  expect((await page.request.get("/api/v1/console/views?page=nope")).status()).toBe(400);
  // from another site, the session cookie is not enough
  expect((await page.request.post("/api/v1/console/views", { headers: { origin: "http://evil.example" }, data: { page: "keys", name: "evil", query: "" } })).status()).toBe(403);
  // views belong to console operators, never to a tenant's token
  expect((await request.get("/api/v1/console/views?page=keys", { headers: { Authorization: `Bearer ${apiToken}` } })).status()).toBe(403);
  expect((await request.get("/api/v1/console/views?page=keys")).status()).toBe(401);
});

test("another operator sees none of these views and cannot change them", async ({ page }, testInfo) => {
  await signInAsOperator(page, testInfo, "/keys");
  const id = await viewId(page, "keys", keysView);

  await signIn(page, VIEWER, "/keys");
  await page.getByTestId("views-button").click();
  await expect(page.getByTestId("views-menu")).toBeVisible();
  await expect(page.getByTestId("views-menu")).not.toContainText(keysView);
  const origin = new URL(page.url()).origin;
  expect((await page.request.patch(`/api/v1/console/views/${id}`, { headers: { origin }, data: { name: "taken over" } })).status()).toBe(404);
  expect((await page.request.delete(`/api/v1/console/views/${id}`, { headers: { origin } })).status()).toBe(404);
  // a read-only account keeps views of its own
  await page.keyboard.press("Escape");
  await saveView(page, `Viewer's own ${RUN}`);
  await expect(page.getByTestId("save-view-dialog")).toHaveCount(0);

  await signInAsOperator(page, testInfo, "/keys");
  await page.getByTestId("views-button").click();
  await expect(page.getByTestId("views-menu").getByRole("link", { name: keysView })).toBeVisible();
  await expect(page.getByTestId("views-menu")).not.toContainText(`Viewer's own ${RUN}`);
});
