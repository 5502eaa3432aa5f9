import { expect, test, type APIRequestContext, type Page, type TestInfo } from "./fixtures";
import { signIn, signInAsOperator, VIEWER } from "./auth";
import { SCREENSHOTS } from "./screenshots";

// The console's one search box (docs/operate.md § Find anything): `/` focuses it; an unknown charge
// is found by its customer id in its kept arguments and opened; a key prefix, an execution id and
// tool:… state:… answer too; a bad query is said; a viewer may search. Both server configurations.

const RUN = Date.now().toString(36);

async function shot(page: Page, testInfo: TestInfo, name: string) {
  if (!SCREENSHOTS) return;
  for (const width of [1440, 390]) {
    await page.setViewportSize({ width, height: 900 });
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: `e2e/screenshots/search-${name}-${width}-${testInfo.project.name}.png`, fullPage: true, animations: "disabled" });
  }
  await page.setViewportSize({ width: 1440, height: 900 });
}

function invoke(request: APIRequestContext, token: string, key: string, args: unknown) {
  return request.post(`/api/v1/tools/payments.charge/invoke`, { headers: { Authorization: `Bearer ${token}`, "Idempotency-Key": key }, data: args });
}

test.describe.configure({ mode: "serial" });

test("an unknown charge found by its customer id and opened; a prefix, an execution id, filters", async ({ page, request }, testInfo) => {
  const { apiToken } = await signInAsOperator(page, testInfo);
  const key = `e2e-${RUN}-search-charge`;
  const customerId = `cus_search_${RUN}`;
  const res = await invoke(request, apiToken, key, { customerId, amountCents: 4100, currency: "EUR", simulate: { outcome: "throw_after_effect" } });
  expect(res.status(), await res.text()).toBe(502);

  await page.goto("/keys");
  const box = page.getByTestId("console-search");
  // "/" focuses the box once the page has hydrated (a key pressed before that reaches nothing)
  await expect(async () => {
    await page.keyboard.press("/");
    await expect(box).toBeFocused({ timeout: 1_000 });
  }).toPass({ timeout: 30_000 });
  await box.fill(customerId);
  await box.press("Enter");
  await expect(page).toHaveURL(new RegExp(`/search\\?q=${customerId}$`));
  const hit = page.getByTestId("search-execution").filter({ hasText: key });
  await expect(hit).toHaveAttribute("data-matched", "arguments");
  await expect(hit).toContainText("payments.charge");
  // the page says what was searched
  await expect(page.getByTestId("search-query")).toHaveText(`Searched for ${customerId}`);
  await shot(page, testInfo, "by-customer");
  await hit.getByRole("link", { name: key }).click();
  await expect(page).toHaveURL(`/keys/demo/${key}`);
  await expect(page.getByTestId("key-state")).toHaveText("unknown");
  await expect(page.getByTestId("key-arguments-json")).toContainText(customerId);

  // the same call by its key prefix and by its execution id
  const detail = (await (await page.request.get(`/api/v1/keys/demo/${key}`)).json()) as { record: { executionId: string } };
  await page.goto(`/search?q=${encodeURIComponent(`e2e-${RUN}-search`)}`);
  await expect(page.getByTestId("search-key").filter({ hasText: key })).toBeVisible();
  await page.goto(`/search?q=${detail.record.executionId}`);
  await expect(page.getByTestId("search-execution").first()).toHaveAttribute("data-matched", "id");
  await expect(page.getByTestId("search-execution").first()).toContainText(key);

  // filters, and a link to the keys list with them
  await page.goto(`/search?q=${encodeURIComponent("tool:payments.charge state:unknown")}`);
  await expect(page.getByTestId("search-key").filter({ hasText: key })).toBeVisible();
  await page.getByTestId("search-open-keys").click();
  await expect(page).toHaveURL(/\/keys\?tool=payments.charge&state=unknown$/);
  await expect(page.getByTestId("filter-state")).toHaveValue("unknown");
});

test("more calls hold a value than are listed: the page says how many", async ({ page, request }, testInfo) => {
  const { apiToken } = await signInAsOperator(page, testInfo);
  const description = `ord_many_${RUN}`;
  for (let i = 0; i < 52; i++) {
    const res = await invoke(request, apiToken, `e2e-${RUN}-many-${i}`, { customerId: `cus_many_${RUN}_${i}`, amountCents: 100 + i, currency: "EUR", description });
    expect(res.status(), await res.text()).toBe(200);
  }
  // findable by its arguments one audit batch after its intent: the search is asked again until all are
  await expect(async () => {
    await page.goto(`/search?q=${encodeURIComponent(`description:${description}`)}`);
    await expect(page.getByTestId("search-executions-count")).toHaveText("50 of 52", { timeout: 2_000 });
  }).toPass({ timeout: 30_000 });
  await expect(page.getByTestId("search-execution")).toHaveCount(50);
  await expect(page.getByTestId("search-execution").first()).toContainText(`e2e-${RUN}-many-51`);
  await expect(page.getByTestId("search-more")).toHaveText("52 calls hold this value: the newest 50 are listed.");
  await shot(page, testInfo, "more");
  // the bare value: naming the argument would narrow it
  await page.goto(`/search?q=${description}`);
  await expect(page.getByTestId("search-executions-count")).toHaveText("50 of 52");
  await expect(page.getByTestId("search-more")).toHaveText("52 calls hold this value: the newest 50 are listed. Name the argument (name:value) to narrow it.");
  // a value held by one call: no count beyond the list
  await page.goto(`/search?q=cus_many_${RUN}_7`);
  await expect(page.getByTestId("search-executions-count")).toHaveText("1");
  await expect(page.getByTestId("search-more")).toHaveCount(0);
});

test("a bad query is said, and a viewer may search", async ({ page }, testInfo) => {
  await signInAsOperator(page, testInfo);
  await page.goto(`/search?q=${encodeURIComponent("state:sideways")}`);
  await expect(page.getByTestId("search-problem")).toContainText("state:sideways is not a key state");
  await shot(page, testInfo, "problem");
  await page.context().clearCookies();
  await signIn(page, VIEWER);
  await page.goto(`/search?q=${encodeURIComponent(`cus_search_${RUN}`)}`);
  await expect(page.getByTestId("search-execution")).toHaveCount(1);
});

test("export a filtered keys list: the download holds the filter's keys, one a line", async ({ page, request }, testInfo) => {
  const { apiToken } = await signInAsOperator(page, testInfo);
  const prefix = `e2e-${RUN}-export-`;
  for (const i of [1, 2, 3]) expect((await invoke(request, apiToken, `${prefix}${i}`, { customerId: `cus_export_${i}`, amountCents: 100 * i, currency: "EUR" })).status()).toBe(200);
  await page.goto(`/keys?tool=payments.charge&prefix=${prefix}`);
  await expect(page.getByTestId("key-row")).toHaveCount(3);
  const [csv] = await Promise.all([page.waitForEvent("download"), page.getByTestId("export-csv").click()]);
  expect(csv.suggestedFilename()).toBe("idemgate-keys.csv");
  const lines = (await readDownload(csv)).trimEnd().split("\r\n");
  expect(lines[0]).toMatch(/^scope,key,tool,state,resultStatus,/);
  expect(lines.slice(1).map((l) => l.split(",").slice(0, 4).join(",")).sort()).toEqual([1, 2, 3].map((i) => `demo,${prefix}${i},payments.charge,done`));
  const [jsonl] = await Promise.all([page.waitForEvent("download"), page.getByTestId("export-jsonl").click()]);
  const rows = (await readDownload(jsonl)).trimEnd().split("\n").map((l) => JSON.parse(l) as { key: string; resultStatus: number });
  expect(rows.map((r) => r.key).sort()).toEqual([1, 2, 3].map((i) => `${prefix}${i}`));
  await shot(page, testInfo, "keys-export");
});

async function readDownload(download: import("@playwright/test").Download): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of await download.createReadStream()) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

test("copy buttons: on an id and a code block; on plain HTTP (no clipboard API) left out without a hydration error", async ({ page, context }, testInfo) => {
  await context.grantPermissions(["clipboard-read", "clipboard-write"]);
  await signInAsOperator(page, testInfo);
  const key = `e2e-${RUN}-search-charge`;
  await page.goto(`/keys/demo/${key}`);
  await page.getByTestId("copy-execution-id").click();
  const detail = (await (await page.request.get(`/api/v1/keys/demo/${key}`)).json()) as { record: { executionId: string } };
  expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(detail.record.executionId);
  await page.getByTestId("copy-key").click();
  expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(key);
  // the timeline's arguments are a code block with its own copy button
  const inTimeline = page.getByTestId("timeline-arguments").first();
  await inTimeline.locator("summary").click();
  await inTimeline.getByTestId("copy-json").click();
  expect(JSON.parse(await page.evaluate(() => navigator.clipboard.readText()))).toMatchObject({ customerId: `cus_search_${RUN}` });
  await shot(page, testInfo, "key-copy");

  // what a browser on plain HTTP has: no navigator.clipboard (it needs a secure context)
  const plain = await context.browser()!.newContext({ storageState: await context.storageState() });
  await plain.addInitScript(() => Object.defineProperty(Navigator.prototype, "clipboard", { get: () => undefined, configurable: true }));
  const bare = await plain.newPage();
  const errors: string[] = [];
  bare.on("console", (m) => m.type() === "error" && errors.push(m.text()));
  bare.on("pageerror", (e) => errors.push(e.message));
  await bare.goto(`/keys/demo/${key}`);
  await expect(bare.getByTestId("key-arguments-json")).toBeVisible();
  await expect(bare.getByTestId("copy-execution-id")).toHaveCount(0);
  await expect(bare.getByRole("button", { name: "Copy JSON" })).toHaveCount(0);
  await bare.waitForLoadState("networkidle");
  expect(errors).toEqual([]);
  await plain.close();
});
