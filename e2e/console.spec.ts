import { expect, test, type APIRequestContext, type Page, type TestInfo } from "./fixtures";
import { seededCredentials, signIn, signInAsOperator, signInThroughForm, VIEWER } from "./auth";
import { SCREENSHOTS } from "./screenshots";

// The operator console against each server (projects "embedded" and "servers"). The e2e servers run
// the demo tools with a 3 s lease (IDEMGATE_DEMO_LEASE_MS), so a simulated crash is stuck within seconds.

const RUN = Date.now().toString(36);
let seq = 0;
const newKey = (label: string) => `e2e-${RUN}-${label}-${++seq}`;

function shot(page: Page, testInfo: TestInfo, name: string) {
  if (!SCREENSHOTS) return Promise.resolve();
  return page.screenshot({ path: `e2e/screenshots/console-${name}-${testInfo.project.name}.png`, fullPage: true, animations: "disabled" });
}

async function invoke(request: APIRequestContext, token: string, tool: string, key: string | null, args: unknown, session?: string) {
  return request.post(`/api/v1/tools/${tool}/invoke`, {
    headers: {
      Authorization: `Bearer ${token}`,
      ...(key ? { "Idempotency-Key": key } : {}),
      ...(session ? { "Idemgate-Session": session } : {}),
    },
    data: args,
  });
}

const charge = (customerId: string, extra: Record<string, unknown> = {}) => ({ customerId, amountCents: 1999, currency: "EUR", ...extra });
const crash = { simulate: { outcome: "crash_after_effect" } };

async function chargesOf(request: APIRequestContext, token: string, customerId: string): Promise<number> {
  const res = await invoke(request, token, "payments.list_charges", null, { customerId });
  expect(res.status()).toBe(200);
  return ((await res.json()) as { charges: unknown[] }).charges.length;
}

/** Keys in one state, counted through the admin API with the page's session (all pages). */
async function apiCount(page: Page, state: string, tool?: string): Promise<number> {
  let n = 0;
  let cursor: string | null = null;
  do {
    const res = await page.request.get(`/api/v1/keys?state=${state}&limit=500${tool ? `&tool=${encodeURIComponent(tool)}` : ""}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    expect(res.status()).toBe(200);
    const body = (await res.json()) as { items: unknown[]; nextCursor: string | null };
    n += body.items.length;
    cursor = body.nextCursor;
  } while (cursor);
  return n;
}

async function keyState(page: Page, key: string): Promise<string> {
  const res = await page.request.get(`/api/v1/keys/demo/${encodeURIComponent(key)}`);
  return ((await res.json()) as { state: string }).state;
}

/** A crashed call: the side effect happened, the key stays inflight until its lease passes. */
async function crashedKey(request: APIRequestContext, token: string, key: string, customerId: string) {
  const res = await invoke(request, token, "payments.charge", key, charge(customerId, crash));
  expect(res.status()).toBe(500);
}

const keyUrl = (key: string) => `/keys/demo/${encodeURIComponent(key)}`;

const STATES = ["inflight", "stuck", "unknown", "done", "expired"];

test.describe.configure({ mode: "serial" });

test("sign-in refuses wrong credentials readably, then returns to the page asked for", async ({ page }, testInfo) => {
  const creds = seededCredentials(testInfo);

  await page.goto("/keys?state=done");
  await expect(page).toHaveURL(/\/login\?next=%2Fkeys%3Fstate%3Ddone$/);
  await page.getByLabel("Email").fill(creds.email);
  await page.getByLabel("Password").fill("not-the-password");
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByTestId("login-error")).toHaveText("That email and password do not match an active account.");
  await shot(page, testInfo, "login-error");

  // an off-site ?next= is ignored
  await page.goto("/login?next=https%3A%2F%2Fevil.example%2F");
  await page.getByLabel("Email").fill(creds.email);
  await page.getByLabel("Password").fill(creds.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page).toHaveURL(/127\.0\.0\.1:\d+\/$/);
  await expect(page.getByTestId("signed-in-as")).toContainText(creds.email);
  await expect(page.getByTestId("operator-role")).toHaveText("operator");

  // a signed-in operator asked to sign in goes where they wanted to be
  await page.goto("/login?next=%2Fkeys%3Fstate%3Ddone");
  await expect(page).toHaveURL(/\/keys\?state=done$/);
});

test("repeated failed sign-ins for one email are slowed down with a readable message", async ({ page }, testInfo) => {
  const email = `nobody-${RUN}-${testInfo.project.name}@example.com`;
  await page.goto("/login");
  for (let i = 0; i < 10; i++) {
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password").fill(`wrong-${i}`);
    await page.getByRole("button", { name: "Sign in" }).click();
    // the form is reset once the server has answered
    await expect(page.getByLabel("Password")).toHaveValue("");
    await expect(page.getByTestId("login-error")).toHaveText(/do not match/);
  }
  await page.getByLabel("Password").fill("wrong-again");
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByTestId("login-error")).toHaveText(/Too many failed sign-ins for this email\. Try again in \d+ minutes?\./);
  // a client that claims another address is still the same account
  await page.setExtraHTTPHeaders({ "X-Forwarded-For": "203.0.113.7" });
  await page.goto("/login");
  await page.getByLabel("Email").fill(email);
  await page.getByLabel("Password").fill("wrong-elsewhere");
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByTestId("login-error")).toHaveText(/Too many failed sign-ins for this email/);
});

test("the overview's counts match the key store", { tag: "@both-stores" }, async ({ page, request }, testInfo) => {
  const { apiToken } = await signInAsOperator(page, testInfo);
  const customer = `cus-overview-${RUN}`;
  for (let i = 0; i < 3; i++) expect((await invoke(request, apiToken, "payments.charge", newKey("overview"), charge(customer))).status()).toBe(200);
  await crashedKey(request, apiToken, newKey("overview-crash"), customer);

  // keys change state on their own (leases pass), so compare one consistent reading, retrying if one moved
  await expect(async () => {
    await page.goto("/");
    const shown: Record<string, number> = {};
    for (const state of STATES) {
      shown[state] = Number(await page.getByTestId(`count-${state}`).getAttribute("data-count"));
    }
    const actual: Record<string, number> = {};
    for (const state of STATES) actual[state] = await apiCount(page, state);
    expect(shown).toEqual(actual);
    expect(shown.done).toBeGreaterThanOrEqual(3);
  }).toPass({ timeout: 20_000 });

  const row = page.getByTestId("activity-payments.charge");
  await expect(row).toBeVisible();
  expect(Number(await row.getByTestId("executions").textContent())).toBeGreaterThanOrEqual(4);
  // the per-tool columns count what their headers say: the tool's keys stuck and unknown now (the
  // crashed call's key turns stuck once its lease passes), as the key list has them
  await expect(async () => {
    await page.goto("/");
    const held = { stuck: Number(await row.getByTestId("held-stuck").textContent()), unknown: Number(await row.getByTestId("held-unknown").textContent()) };
    expect(held).toEqual({ stuck: await apiCount(page, "stuck", "payments.charge"), unknown: await apiCount(page, "unknown", "payments.charge") });
    expect(held.stuck).toBeGreaterThanOrEqual(1);
  }).toPass({ timeout: 20_000 });
  await expect(page.getByTestId("activity-table").locator("thead")).toContainText("Keys held now");
  await expect(page.getByTestId("open-anomalies")).toBeVisible();
  await expect(page.getByTestId("overview-keystore-status")).toHaveText("Reachable");

  await page.getByTestId("count-done").click();
  await expect(page).toHaveURL(/\/keys\?state=done$/);
  await expect(page.getByTestId("filter-state")).toHaveValue("done");
  await page.goto("/");
  await shot(page, testInfo, "overview");
  // the tool's name leads to its page
  await page.getByTestId("activity-payments.charge").getByTestId("activity-tool-link").click();
  await expect(page).toHaveURL(/\/tools\/payments\.charge$/);
});

test("the overview fits a 390 px window: per-tool cards with the table's numbers and links", async ({ page, request }, testInfo) => {
  const { apiToken } = await signInAsOperator(page, testInfo);
  expect((await invoke(request, apiToken, "payments.charge", newKey("overview-narrow"), charge(`cus-narrow-${RUN}`))).status()).toBe(200);
  await crashedKey(request, apiToken, newKey("overview-narrow-crash"), `cus-narrow-${RUN}`);

  // the wide table's figures for the tool, once its crashed call's key is stuck
  await page.setViewportSize({ width: 1440, height: 900 });
  const row = page.getByTestId("activity-payments.charge");
  await expect(async () => {
    await page.goto("/");
    expect(Number(await row.getByTestId("held-stuck").textContent())).toBeGreaterThanOrEqual(1);
  }).toPass({ timeout: 20_000 });
  const wide = { executions: await row.getByTestId("executions").textContent(), stuck: await row.getByTestId("held-stuck").textContent(), unknown: await row.getByTestId("held-unknown").textContent() };
  await expect(page.getByTestId("activity-cards")).toBeHidden();
  if (SCREENSHOTS) await page.screenshot({ path: `e2e/screenshots/console-overview-1440-${testInfo.project.name}.png`, fullPage: true, animations: "disabled" });

  await page.setViewportSize({ width: 390, height: 844 });
  await expect(page.getByTestId("activity-table")).toBeHidden();
  const card = page.getByTestId("activity-card-payments.charge");
  await expect(card).toBeVisible();
  expect(await page.evaluate(() => document.documentElement.scrollWidth <= document.documentElement.clientWidth)).toBe(true);
  // nor does anything in the per-tool section scroll sideways inside its own box
  const overflowing = await page.locator('section[aria-labelledby="activity-heading"]').evaluate((s) => [s, ...s.querySelectorAll("*")].filter((e) => e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).display !== "inline").map((e) => e.outerHTML.slice(0, 80)));
  expect(overflowing).toEqual([]);
  expect({ executions: await card.getByTestId("executions").textContent(), stuck: await card.getByTestId("held-stuck").textContent(), unknown: await card.getByTestId("held-unknown").textContent() }).toEqual(wide);
  if (SCREENSHOTS) await page.screenshot({ path: `e2e/screenshots/console-overview-390-${testInfo.project.name}.png`, fullPage: true, animations: "disabled" });
  await expect(card.getByTestId("held-stuck")).toHaveAttribute("href", "/keys?tool=payments.charge&state=stuck");
  await card.getByTestId("activity-tool-link").click();
  await expect(page).toHaveURL(/\/tools\/payments\.charge$/);
});

test("keys can be filtered by state, tool and key prefix, all in the URL", { tag: "@both-stores" }, async ({ page, request }, testInfo) => {
  const { apiToken } = await signInAsOperator(page, testInfo);
  const prefix = `e2e-${RUN}-filter-`;
  for (let i = 0; i < 2; i++) expect((await invoke(request, apiToken, "payments.charge", `${prefix}charge-${i}`, charge(`cus-filter-${RUN}`))).status()).toBe(200);
  expect((await invoke(request, apiToken, "tickets.create", `${prefix}ticket`, { title: "printer on fire" })).status()).toBe(200);

  await page.goto("/keys");
  await expect(page.getByTestId("key-row").first()).toBeVisible();

  await page.getByTestId("filter-state").selectOption("done");
  await expect(page).toHaveURL(/state=done/);
  // the previous rows stay (dimmed) until the filtered page arrives
  await expect(page.getByTestId("keys-table")).not.toHaveAttribute("aria-busy", "true");
  await expect(page.locator('[data-testid="key-row"][data-state="done"]').first()).toBeVisible();
  await expect(page.locator('[data-testid="key-row"]:not([data-state="done"])')).toHaveCount(0);

  await page.getByTestId("filter-prefix").fill(prefix);
  await expect(page).toHaveURL(new RegExp(`prefix=${prefix}`));
  await expect(page.getByTestId("key-row")).toHaveCount(3);

  await page.getByTestId("filter-tool").selectOption("payments.charge");
  await expect(page).toHaveURL(/tool=payments\.charge/);
  await expect(page.getByTestId("key-row")).toHaveCount(2);
  await expect(page.getByTestId("keys-table")).not.toContainText("tickets.create");

  // the URL alone reproduces the view
  await page.reload();
  await expect(page.getByTestId("filter-tool")).toHaveValue("payments.charge");
  await expect(page.getByTestId("filter-prefix")).toHaveValue(prefix);
  await expect(page.getByTestId("key-row")).toHaveCount(2);
  await shot(page, testInfo, "keys-filtered");

  await page.getByTestId("filter-prefix").fill(`${prefix}nothing-like-this`);
  await expect(page.getByTestId("keys-empty")).toContainText("No keys match these filters.");
});

test("a key's page shows its record, stored result and one timeline", async ({ page, request }, testInfo) => {
  const { apiToken } = await signInAsOperator(page, testInfo);
  const key = newKey("timeline");
  const args = charge(`cus-timeline-${RUN}`);
  expect((await invoke(request, apiToken, "payments.charge", key, args, "run-a")).status()).toBe(200);
  const replay = await invoke(request, apiToken, "payments.charge", key, args, "run-b");
  expect(replay.headers()["idempotent-replayed"]).toBe("true");

  await page.goto(`/keys?prefix=${encodeURIComponent(key)}`);
  await page.getByRole("link", { name: key }).click();
  await expect(page).toHaveURL(new RegExp(`/keys/demo/${key}$`));
  await expect(page.getByTestId("key-state")).toHaveText("done");
  await expect(page.getByTestId("key-record")).toContainText("payments.charge");
  await expect(page.getByTestId("key-result")).toContainText('"amountCents": 1999');

  const timeline = page.getByTestId("timeline");
  await expect(timeline.locator('[data-type="intent"]')).toHaveCount(1);
  await expect(timeline.locator('[data-type="outcome"]')).toContainText("succeeded");
  const suppression = timeline.locator('[data-type="suppression"]');
  await expect(suppression).toHaveCount(1);
  await expect(suppression).toContainText(/Duplicate suppressed \(replay\) [\d.]+ (ms|s) after the original/);
  await expect(suppression).toContainText("session run-b");
  await expect(suppression).toContainText("another session than the original");
  // done keys have nothing to release
  await expect(page.getByTestId("release-button")).toHaveCount(0);
  await shot(page, testInfo, "key-detail");
});

test("a crashed call shows up stuck; releasing it lets the retry run exactly once", { tag: "@both-stores" }, async ({ page, request }, testInfo) => {
  const { apiToken } = await signInAsOperator(page, testInfo);
  const key = newKey("stuck");
  const customer = `cus-stuck-${RUN}`;
  const args = charge(customer);
  await crashedKey(request, apiToken, key, customer);
  expect(await chargesOf(request, apiToken, customer)).toBe(1);
  // while the lease runs the retry is told to wait, then an operator must decide
  expect((await invoke(request, apiToken, "payments.charge", key, { ...args, ...crash })).status()).toBe(409);

  await page.goto(`/keys?state=stuck&prefix=${encodeURIComponent(key)}`);
  await expect(page.locator(`[data-testid="key-row"][data-key="${key}"]`)).toHaveAttribute("data-state", "stuck", { timeout: 15_000 });
  await page.getByRole("link", { name: key }).click();
  await expect(page.getByTestId("key-state")).toHaveText("stuck");

  await page.getByTestId("release-button").click();
  const dialog = page.getByTestId("release-dialog");
  await expect(dialog).toBeVisible();
  await expect(dialog.getByTestId("confirm-release")).toBeDisabled();
  await dialog.getByTestId("reason-input").fill("PSP shows no charge for this order (e2e)");
  await dialog.getByTestId("confirm-release").click();
  await expect(dialog).toBeHidden();
  await expect(page.getByTestId("key-state")).toHaveText("absent");
  await expect(page.getByTestId("timeline").locator('[data-type="operator"]')).toContainText("PSP shows no charge for this order (e2e)");
  await expect(page.getByTestId("timeline").locator('[data-type="operator"]')).toContainText("stuck → absent");

  // the retry runs the tool once more, and only once
  const retry = await invoke(request, apiToken, "payments.charge", key, { ...args, ...crash, simulate: { outcome: "ok" } });
  expect(retry.status()).toBe(200);
  expect(await chargesOf(request, apiToken, customer)).toBe(2);
  const again = await invoke(request, apiToken, "payments.charge", key, { ...args, ...crash, simulate: { outcome: "ok" } });
  expect(again.headers()["idempotent-replayed"]).toBe("true");
  expect(await chargesOf(request, apiToken, customer)).toBe(2);

  await page.reload();
  await expect(page.getByTestId("key-state")).toHaveText("done");
  await expect(page.getByTestId("timeline").locator('[data-type="intent"]')).toHaveCount(2);
  await shot(page, testInfo, "key-released");
});

test("resolving a stuck key stores the operator's result, validated first", async ({ page, request }, testInfo) => {
  const { apiToken } = await signInAsOperator(page, testInfo);
  const key = newKey("resolve");
  const customer = `cus-resolve-${RUN}`;
  await crashedKey(request, apiToken, key, customer);
  await expect.poll(() => keyState(page, key), { timeout: 15_000 }).toBe("stuck");

  await page.goto(keyUrl(key));
  await expect(page.getByTestId("key-state")).toHaveText("stuck");
  await page.getByTestId("resolve-button").click();
  const dialog = page.getByTestId("resolve-dialog");
  await dialog.getByTestId("reason-input").fill("charge ch_manual found in the PSP dashboard");
  await dialog.getByTestId("result-input").fill("{ chargeId: oops");
  await dialog.getByTestId("confirm-resolve").click();
  await expect(dialog.getByTestId("result-error")).toContainText("Not valid JSON");
  await expect(dialog).toBeVisible();

  await dialog.getByTestId("result-input").fill('{ "chargeId": "ch_manual", "amountCents": 1999 }');
  await dialog.getByTestId("status-input").fill("201");
  await shot(page, testInfo, "resolve-dialog");
  await dialog.getByTestId("confirm-resolve").click();
  await expect(dialog).toBeHidden();
  await expect(page.getByTestId("key-state")).toHaveText("done");
  await expect(page.getByTestId("key-result")).toContainText("ch_manual");
  await expect(page.getByTestId("key-result")).toContainText("HTTP 201");

  const replay = await invoke(request, apiToken, "payments.charge", key, charge(customer, crash));
  expect(replay.status()).toBe(201);
  expect(replay.headers()["idempotent-replayed"]).toBe("true");
  expect(await replay.json()).toEqual({ chargeId: "ch_manual", amountCents: 1999 });
});

test("bulk release: the selected keys, then every stuck key matching the filter", async ({ page, request }, testInfo) => {
  const { apiToken } = await signInAsOperator(page, testInfo);
  const prefix = `e2e-${RUN}-bulk-`;
  const keys = [`${prefix}a`, `${prefix}b`, `${prefix}c`];
  for (const key of keys) await crashedKey(request, apiToken, key, `cus-bulk-${RUN}`);
  for (const key of keys) await expect.poll(() => keyState(page, key), { timeout: 15_000 }).toBe("stuck");

  await page.goto(`/keys?state=stuck&prefix=${encodeURIComponent(prefix)}`);
  await expect(page.getByTestId("key-row")).toHaveCount(3);
  await page.locator(`[data-testid="key-row"][data-key="${keys[0]}"]`).getByTestId("row-select").check();
  await page.getByTestId("release-selected").click();
  let dialog = page.getByTestId("bulk-release-dialog");
  await expect(dialog.getByTestId("bulk-release-count")).toHaveText("1 selected key");
  await dialog.getByTestId("reason-input").fill("bulk e2e: selected");
  await dialog.getByTestId("confirm-release").click();
  await expect(page.getByTestId("bulk-released")).toHaveText("1");
  await expect(page.getByTestId("bulk-refused")).toHaveText("0");
  await expect(page.getByTestId("key-row")).toHaveCount(2);

  await expect(page.getByTestId("release-all-held")).toHaveText("Release all stuck keys matching this filter");
  await page.getByTestId("release-all-held").click();
  dialog = page.getByTestId("bulk-release-dialog");
  await expect(dialog.getByTestId("bulk-release-count")).toHaveText("2 stuck keys");
  await expect(dialog).toContainText(`keys starting with "${prefix}"`);
  await dialog.getByTestId("reason-input").fill("bulk e2e: all matching");
  await shot(page, testInfo, "bulk-release-dialog");
  await dialog.getByTestId("confirm-release").click();
  await expect(page.getByTestId("bulk-released")).toHaveText("2");
  await expect(page.getByTestId("keys-empty")).toBeVisible();
  for (const key of keys) expect(await keyState(page, key)).toBe("absent");
});

test("a viewer sees no release or resolve controls, a forged release is refused with 403, and the session reads /api/metrics", async ({ page, request }, testInfo) => {
  const { apiToken } = seededCredentials(testInfo);
  const key = newKey("viewer");
  await crashedKey(request, apiToken, key, `cus-viewer-${RUN}`);

  await signIn(page, VIEWER);
  await expect(page.getByTestId("operator-role")).toHaveText("viewer");
  await expect.poll(() => keyState(page, key), { timeout: 15_000 }).toBe("stuck");

  await page.goto(`/keys?prefix=${encodeURIComponent(key)}`);
  await expect(page.getByTestId("key-row")).toHaveCount(1);
  await expect(page.getByTestId("bulk-actions")).toHaveCount(0);
  await expect(page.getByTestId("row-select")).toHaveCount(0);

  await page.goto(keyUrl(key));
  await expect(page.getByTestId("key-state")).toHaveText("stuck");
  await expect(page.getByTestId("release-button")).toHaveCount(0);
  await expect(page.getByTestId("resolve-button")).toHaveCount(0);
  await shot(page, testInfo, "viewer-key");

  const origin = new URL(page.url()).origin;
  const forged = await page.request.post(`/api/v1/keys/demo/${encodeURIComponent(key)}/release`, { headers: { Origin: origin }, data: { reason: "forged by a viewer" } });
  expect(forged.status()).toBe(403);
  expect((await forged.json()).detail).toMatch(/viewer role may not release/);
  const forgedBulk = await page.request.post("/api/v1/keys/bulk-release", { headers: { Origin: origin }, data: { reason: "forged", filter: {} } });
  expect(forgedBulk.status()).toBe(403);
  expect(await keyState(page, key)).toBe("stuck");

  // the console session reads the metrics, which span every tenant, without the metrics token
  const scraped = await page.request.get("/api/metrics");
  expect(scraped.status()).toBe(200);
  expect(await scraped.text()).toContain("idemgate_keys{");
});

test("the audit trail shows who did what, why, before and after, filtered by action", async ({ page, request }, testInfo) => {
  const { apiToken, email } = await signInAsOperator(page, testInfo);
  const key = newKey("audit");
  await crashedKey(request, apiToken, key, `cus-audit-${RUN}`);
  const reason = `audit e2e ${RUN}: no charge at the PSP`;
  const origin = new URL(page.url()).origin;
  // within its lease the crashed call still counts as running: releasing it takes an explicit force
  const res = await page.request.post(`/api/v1/keys/demo/${encodeURIComponent(key)}/release`, { headers: { Origin: origin }, data: { reason, force: true } });
  expect(res.status()).toBe(200);

  await page.goto("/audit");
  const row = page.getByTestId("audit-row").filter({ hasText: reason });
  await expect(row).toHaveCount(1);
  await expect(row).toHaveAttribute("data-actor", email);
  await expect(row).toContainText("inflight → absent");
  await expect(row.getByRole("link", { name: key })).toHaveAttribute("href", keyUrl(key));

  await page.getByTestId("audit-filter-action").selectOption("release");
  await page.getByTestId("audit-apply").click();
  await expect(page).toHaveURL(/action=release/);
  for (const action of await page.getByTestId("audit-row").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-action")))) expect(action).toBe("release");
  await expect(page.getByTestId("audit-row").filter({ hasText: reason })).toHaveCount(1);
  await shot(page, testInfo, "audit");
});

test("polling never overlaps requests and keeps the rows on screen while the next answer loads", async ({ page }, testInfo) => {
  await signInAsOperator(page, testInfo);
  await page.goto("/keys");
  await expect(page.getByTestId("key-row").first()).toBeVisible();

  let inFlight = 0;
  let maxInFlight = 0;
  let requests = 0;
  // the list's own requests (a page of 50); "Release all matching" asks separately whether anything is held
  await page.route(/\/api\/v1\/keys\?.*limit=50/, async (route) => {
    requests++;
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    await new Promise((r) => setTimeout(r, 3_000)); // slower than the 2 s interval
    try {
      await route.continue();
    } finally {
      inFlight--;
    }
  });
  await page.getByTestId("poll-interval").getByText("2s").click();
  // two polls at least: the second one starts only once the first has its answer (each is held 3 s,
  // longer than the interval); however long a busy machine takes to get there
  await expect.poll(() => requests, { timeout: 45_000 }).toBeGreaterThanOrEqual(2);
  expect(maxInFlight).toBe(1);
  await expect(page.getByTestId("key-row").first()).toBeVisible();
  // the choice survives a reload (localStorage)
  // a poll still held by the handler finishes before the reload; unhandled, its continue() would find the request gone
  await page.unrouteAll({ behavior: "wait" });
  await page.reload();
  await expect(page.getByTestId("poll-interval").getByRole("radio", { name: "2s" })).toBeChecked();
  await page.getByTestId("poll-interval").getByText("Off").click();
});

test("on a narrow window in dark mode the nav folds into a menu and the keys table fits the screen", async ({ page, request }, testInfo) => {
  await page.setViewportSize({ width: 390, height: 800 });
  await page.emulateMedia({ colorScheme: "dark" });
  const { apiToken } = await signInAsOperator(page, testInfo);
  // a key of its own to list, whatever ran before
  expect((await invoke(request, apiToken, "payments.charge", newKey("narrow-dark"), charge(`cus-narrow-dark-${RUN}`))).status()).toBe(200);
  await page.goto("/keys");
  await expect(page.getByTestId("key-row").first()).toBeVisible();
  await expect(page.getByRole("navigation", { name: "Console", exact: true })).toBeHidden();
  // below 768 px the table keeps state and key, with tool, scope and age under the key: it fits its
  // frame without scrolling sideways, and nothing else is wider than the screen (the bulk release button was)
  const scrolls = await page.getByTestId("keys-table").evaluate((t) => t.parentElement!.scrollWidth > t.parentElement!.clientWidth);
  expect(scrolls).toBe(false);
  await expect(page.getByTestId("release-all-held")).toBeVisible();
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
  await page.getByText("Menu", { exact: true }).click();
  await expect(page.getByRole("navigation", { name: "Console (menu)" }).getByRole("link", { name: "Audit trail" })).toBeVisible();
  await shot(page, testInfo, "narrow-dark");
  await page.getByRole("navigation", { name: "Console (menu)" }).getByRole("link", { name: "Audit trail" }).click();
  await expect(page).toHaveURL(/\/audit$/);
  await expect(page.getByRole("navigation", { name: "Console (menu)" })).toBeHidden();
});

test("signing out ends the session for pages and the API", async ({ page }, testInfo) => {
  // a session of its own: signing out ends it on the server
  await signInThroughForm(page, seededCredentials(testInfo), "/audit");
  await expect(page).toHaveURL(/\/audit$/);
  await page.getByTestId("sign-out").click();
  await expect(page).toHaveURL(/\/login$/);
  await shot(page, testInfo, "signed-out");
  await page.goto("/keys");
  await expect(page).toHaveURL(/\/login\?next=%2Fkeys$/);
  expect((await page.request.get("/api/v1/keys")).status()).toBe(401);
});

test("an unknown console URL gets the not-found page inside the console, with its navigation", async ({ page, consoleErrors }, testInfo) => {
  // the page answers 404, which the browser logs
  consoleErrors.allow(/status of 404 \(Not Found\) \(http:\/\/[^/]+\/(no-such-page|keys\/demo\/x\/y)/);
  await signInAsOperator(page, testInfo);
  for (const path of ["/no-such-page", "/keys/demo/x/y"]) {
    const res = await page.goto(path);
    expect(res?.status(), path).toBe(404);
    await expect(page.getByTestId("not-found")).toContainText("This page could not be found");
    // inside the console: its header and navigation, the operator still signed in
    await expect(page.getByTestId("sign-out")).toBeVisible();
    await expect(page.getByTestId("not-found").getByRole("link", { name: "Keys" })).toHaveAttribute("href", "/keys");
  }
  await shot(page, testInfo, "not-found");
  // signed out, the same URL asks to sign in first
  await page.context().clearCookies();
  await page.goto("/no-such-page");
  await expect(page).toHaveURL(/\/login\?next=%2Fno-such-page$/);
});

test("the keys list says when a ?state= is not a state, shows stored statuses and replays, and has nothing to release when nothing is held", { tag: "@both-stores" }, async ({ page, request }, testInfo) => {
  const { apiToken } = await signInAsOperator(page, testInfo);
  const prefix = `e2e-${RUN}-status-`;
  // a declined card: done with a 402, replayed twice
  for (let i = 0; i < 3; i++) {
    expect((await invoke(request, apiToken, "payments.charge", `${prefix}declined`, { ...charge(`cus-status-${RUN}`), simulate: { outcome: "decline" } })).status()).toBe(402);
  }
  await page.goto(`/keys?prefix=${prefix}&state=finished`);
  await expect(page.getByTestId("keys-bad-state")).toContainText('There is no key state "finished"');
  const row = page.locator(`[data-testid="key-row"][data-key="${prefix}declined"]`);
  await expect(row.getByTestId("result-status")).toContainText("402");
  await expect(row.getByTestId("row-replays")).toHaveText("2");
  // nothing stuck or unknown under this prefix: nothing to release
  await expect(page.getByTestId("release-all-held")).toBeDisabled();
  await page.goto(`/keys?prefix=${prefix}`);
  await expect(page.getByTestId("keys-bad-state")).toHaveCount(0);
  await expect(page.getByTestId("release-all-held")).toBeDisabled();
  await shot(page, testInfo, "keys-statuses");
});
