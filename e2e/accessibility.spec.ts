import AxeBuilder from "@axe-core/playwright";
import { expect, test, type Page } from "./fixtures";
import { signInAsOperator } from "./auth";

// Every console page scanned with axe (WCAG 2 A and AA rules) as an operator sees it, on a wide and
// a narrow window: no serious or critical violation. The pages that show one record (a key, an
// anomaly, a tool) are reached through their lists, so the scan sees real data.

const WIDTHS = [
  { name: "1440", width: 1440, height: 900 },
  { name: "390", width: 390, height: 844 },
] as const;

async function scan(page: Page, what: string): Promise<void> {
  const { violations } = await new AxeBuilder({ page }).withTags(["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]).analyze();
  const grave = violations.filter((v) => v.impact === "serious" || v.impact === "critical");
  const described = grave.map((v) => `${v.impact} ${v.id}: ${v.help} — ${v.nodes.slice(0, 5).map((n) => n.target.join(" ")).join(", ")}`);
  expect(described, `accessibility violations on ${what}`).toEqual([]);
}

/** Opens the first link that `rows` hold, when the list has one; says whether it did. */
async function openFirst(page: Page, list: string, rowLink: string): Promise<boolean> {
  await page.goto(list);
  const link = page.locator(rowLink).first();
  // the lists load their rows after the page: give them time, then take an empty list as one
  if (!(await link.waitFor({ timeout: 15_000 }).then(() => true, () => false))) return false;
  await link.click();
  await page.waitForURL((url) => url.pathname !== list);
  return true;
}

const PAGES = ["/", "/keys", "/anomalies", "/audit", "/tools", "/status", "/docs", "/tokens", "/webhooks"];

// one test per page and width (a few seconds each; one test over all of them ran past any fair bound
// on a busy machine, and named no page when it did)
for (const size of WIDTHS) {
  test.describe(`at ${size.name} px`, () => {
    test.beforeEach(async ({ page }) => {
      await page.setViewportSize({ width: size.width, height: size.height });
    });

    for (const path of PAGES) {
      test(`${path} has no serious or critical accessibility violation`, async ({ page }, testInfo) => {
        await signInAsOperator(page, testInfo, path);
        await expect(page.locator("main")).toBeVisible();
        await scan(page, path);
      });
    }

    test("the saved views menu and its dialog have no serious or critical accessibility violation", async ({ page }, testInfo) => {
      await signInAsOperator(page, testInfo, "/keys");
      await page.getByTestId("views-button").click();
      await expect(page.getByTestId("views-menu").getByTestId("save-view")).toBeVisible();
      await scan(page, "/keys with the saved views menu open");
      await page.getByTestId("save-view").click();
      await expect(page.getByTestId("view-name")).toBeVisible();
      await scan(page, "/keys with the save view dialog open");
    });

    // the detail pages, each reached through its list, so the scan sees real data
    test("a key's page has no serious or critical accessibility violation", async ({ page, request }, testInfo) => {
      const { apiToken } = await signInAsOperator(page, testInfo);
      // a charge of our own, so the list has a key (the e2e servers seed no demo traffic)
      const charged = await request.post("/api/v1/tools/payments.charge/invoke", {
        headers: { Authorization: `Bearer ${apiToken}`, "Idempotency-Key": `a11y-${size.name}-${Date.now()}` },
        data: { customerId: `cus_a11y_${size.name}`, amountCents: 1999, currency: "EUR" },
      });
      expect(charged.status()).toBe(200);
      expect(await openFirst(page, "/keys", '[data-testid="key-row"] a[href^="/keys/"]'), "a key to open").toBe(true);
      await scan(page, `a key page (${new URL(page.url()).pathname})`);
    });

    test("a tool's page and an anomaly's page have no serious or critical accessibility violation", async ({ page, request }, testInfo) => {
      const { apiToken } = await signInAsOperator(page, testInfo);
      expect(await openFirst(page, "/tools", 'main a[href^="/tools/"]'), "a tool to open").toBe(true);
      await scan(page, `a tool page (${new URL(page.url()).pathname})`);
      // an anomaly of our own, found at once: a result replayed to another session is a stale suppression
      const key = `a11y-stale-${size.name}-${Date.now()}`;
      const charge = (session: string) =>
        request.post("/api/v1/tools/payments.charge/invoke", {
          headers: { Authorization: `Bearer ${apiToken}`, "Idempotency-Key": key, "Idemgate-Session": session },
          data: { customerId: `cus_a11y_stale_${size.name}`, amountCents: 1999, currency: "EUR" },
        });
      expect((await charge("a11y-run-A")).status()).toBe(200);
      expect((await charge("a11y-run-B")).headers()["idempotent-replayed"]).toBe("true");
      await page.goto("/anomalies");
      await page.getByTestId("run-reconciler").click();
      await expect(page.getByTestId("reconcile-result")).toBeVisible();
      // the table's row at 1440 px, the card at 390 px
      const link = page.locator(`[data-key="${key}"] a[href^="/anomalies/"]:visible`).first();
      await link.click();
      await page.waitForURL(/\/anomalies\/[0-9a-f-]+$/);
      await expect(page.getByTestId("anomaly-type")).toHaveText("Stale suppression");
      await scan(page, `an anomaly page (${new URL(page.url()).pathname})`);
    });
  });
}

test("the sign-in page has no serious or critical accessibility violation", async ({ page }) => {
  await page.goto("/login");
  await expect(page.getByLabel("Email")).toBeVisible();
  await scan(page, "/login");
});
