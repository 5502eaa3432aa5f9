import { expect, test, type APIResponse, type Page, type TestInfo } from "./fixtures";
import { signInAsOperator } from "./auth";
import { SCREENSHOTS } from "./screenshots";

// The operator audit trail on both configurations: calls run from the console and API token
// operations listed; date range, actor, action and target filters applied together in the URL,
// through the cursor; bad filter values said in the page and refused by the API; a table that cuts
// no column at 1440 px and cards at 390 px.

const RUN = Date.now().toString(36);
const TODAY = new Date().toISOString().slice(0, 10);

function shot(page: Page, testInfo: TestInfo, name: string) {
  if (!SCREENSHOTS) return Promise.resolve();
  return page.screenshot({ path: `e2e/screenshots/audit-${name}-${testInfo.project.name}.png`, fullPage: true, animations: "disabled" });
}

async function ok(res: APIResponse, status = 200) {
  expect(res.status(), await res.text()).toBe(status);
  return res.json();
}

async function expectProblem(res: APIResponse, field: string) {
  expect(res.status(), await res.text()).toBe(400);
  expect(res.headers()["content-type"]).toContain("application/problem+json");
  const body = await res.json();
  expect(body).toMatchObject({ type: "/problems/invalid_arguments", status: 400 });
  expect(JSON.stringify(body)).toContain(field);
}

/** Every row the API lists for a query, following the cursor one row at a time. */
async function everyRow(page: Page, query: Record<string, string>) {
  const rows: { id: string; actor: string; action: string; scope: string | null; key: string | null; at: string }[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 50; i++) {
    const q = new URLSearchParams({ ...query, limit: "1", ...(cursor ? { cursor } : {}) });
    const page1 = (await ok(await page.request.get(`/api/v1/audit?${q}`))) as { items: typeof rows; nextCursor: string | null };
    rows.push(...page1.items);
    if (!page1.nextCursor) return rows;
    cursor = page1.nextCursor;
  }
  throw new Error("the cursor never ended");
}

test("console invokes and token operations are listed; date, actor, action and target filters apply together", async ({ page }, testInfo) => {
  const { email } = await signInAsOperator(page, testInfo);
  const origin = new URL(page.url()).origin;
  const scope = `e2e-audit-${RUN}-${testInfo.project.name}`;

  // three calls run from the console, with keys, in one tenant's scope
  for (const n of [1, 2, 3]) {
    const ran = await ok(
      await page.request.post("/api/v1/console/invoke", {
        headers: { origin },
        data: { tool: "payments.list_charges", scope, key: `audit-${RUN}-${n}`, arguments: JSON.stringify({ customerId: `cus-audit-${RUN}` }) },
      }),
    );
    expect(ran.response.status).toBe(200);
  }
  // and an API token for that scope, created and revoked
  const token = await ok(await page.request.post("/api/v1/tokens", { headers: { origin }, data: { scope, label: `audit e2e ${RUN}` } }), 201);
  await ok(await page.request.post(`/api/v1/tokens/${token.id}/revoke`, { headers: { origin }, data: { reason: `audit e2e ${RUN}: retired` } }));

  // through the API, one row a page, the filters hold on every page
  const invokes = await everyRow(page, { from: TODAY, to: TODAY, actor: email, action: "invoke", target: scope });
  expect(invokes.map((r) => r.key).sort()).toEqual([1, 2, 3].map((n) => `audit-${RUN}-${n}`));
  expect(new Set(invokes.map((r) => r.id)).size).toBe(3);
  const everything = await everyRow(page, { target: scope });
  expect(everything.map((r) => r.action).sort()).toEqual(["invoke", "invoke", "invoke", "token_create", "token_revoke"]);
  // a day with nothing in it
  expect(await everyRow(page, { to: "2020-01-01", target: scope })).toEqual([]);

  // the page: every filter filled, one Apply, all of them in the URL
  await page.setViewportSize({ width: 1440, height: 900 });
  await page.goto("/audit");
  await page.getByTestId("audit-filter-from").fill(TODAY);
  await page.getByTestId("audit-filter-to").fill(TODAY);
  await page.getByTestId("audit-filter-actor").selectOption(email);
  await page.getByTestId("audit-filter-action").selectOption("invoke");
  await page.getByTestId("audit-filter-target").fill(scope);
  await page.getByTestId("audit-apply").click();
  await expect(page).toHaveURL(new RegExp(`from=${TODAY}.*to=${TODAY}.*actor=.*action=invoke.*target=${scope}`));
  const rows = page.getByTestId("audit-row");
  await expect(rows).toHaveCount(3);
  for (const action of await rows.evaluateAll((r) => r.map((e) => e.getAttribute("data-action")))) expect(action).toBe("invoke");
  await expect(rows.first().getByTestId("audit-invoke-target")).toContainText("payments.list_charges");
  await expect(rows.first().getByRole("link", { name: `audit-${RUN}-3` })).toBeVisible();
  await expect(rows.first()).toContainText("answered 200");

  // the token's two rows, under the same date range and actor
  await page.getByTestId("audit-filter-action").selectOption("");
  await page.getByTestId("audit-apply").click();
  await expect(rows).toHaveCount(5);
  await expect(rows.filter({ hasText: `audit e2e ${RUN}: retired` })).toHaveAttribute("data-action", "token_revoke");
  await expect(rows.locator('[data-testid="audit-token-target"]')).toHaveCount(2);
  await expect(page.getByTestId("audit-cards")).toBeHidden();

  // at 1440 px no column is cut: every cell shows all it holds, and the table fits its frame
  const cut = await page.getByTestId("audit-table").evaluate((table) => {
    const frame = table.parentElement!;
    const cells = [...table.querySelectorAll("th, td")].filter((c) => c.scrollWidth > c.clientWidth + 1).map((c) => c.textContent);
    return { cells, table: table.scrollWidth, frame: frame.clientWidth };
  });
  expect(cut.cells).toEqual([]);
  expect(cut.table).toBeLessThanOrEqual(cut.frame);
  await shot(page, testInfo, "1440");

  // at 390 px: cards, nothing wider than the screen
  await page.setViewportSize({ width: 390, height: 844 });
  await expect(page.getByTestId("audit-table")).toBeHidden();
  const cards = page.getByTestId("audit-card");
  await expect(cards).toHaveCount(5);
  await expect(cards.filter({ hasText: `audit e2e ${RUN}: retired` })).toBeVisible();
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
  await shot(page, testInfo, "390");
});

test("bad filter values are said on the page and refused by the API, and change nothing", async ({ page }, testInfo) => {
  await signInAsOperator(page, testInfo);
  await page.goto("/audit?from=2026-13-45&action=delete_everything&actor=someone");
  const alert = page.getByTestId("audit-filter-error");
  await expect(alert).toBeVisible();
  await expect(alert).toContainText("from");
  await expect(alert).toContainText('"2026-13-45" is not a date');
  await expect(alert).toContainText('unknown action "delete_everything"');
  await expect(page.getByTestId("audit-row")).toHaveCount(0);
  // the valid ones stay in the form, to be corrected
  await expect(page.getByTestId("audit-filter-actor")).toHaveValue("someone");
  await page.goto("/audit?from=2026-03-05&to=2026-03-01");
  await expect(page.getByTestId("audit-filter-error")).toContainText("ends before it starts");
  await shot(page, testInfo, "bad-filters");

  await expectProblem(await page.request.get("/api/v1/audit?from=yesterday"), "from");
  await expectProblem(await page.request.get("/api/v1/audit?to=2026-02-30"), "to");
  await expectProblem(await page.request.get("/api/v1/audit?action=delete_everything"), "action");
  await expectProblem(await page.request.get("/api/v1/audit?from=2026-03-05&to=2026-03-01"), "to");
});
