import { expect, test, type Page, type TestInfo } from "./fixtures";
import { signInAsOperator } from "./auth";
import { SCREENSHOTS } from "./screenshots";

// The user guides (docs/*.md) served in the console: rendered from their Markdown on the server,
// reached from the header's Docs entry, linked to each other.

async function shot(page: Page, testInfo: TestInfo, name: string) {
  if (!SCREENSHOTS) return;
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: `e2e/screenshots/${name}-${testInfo.project.name}.png`, fullPage: false, animations: "disabled" });
}

const GUIDES = [
  { slug: "concepts", title: "Concepts", section: "The two quiet failure modes" },
  { slug: "integrate", title: "Integrate", section: "Agent frameworks" },
  { slug: "operate", title: "Operate", section: "Security model" },
];

test("the docs render each guide from its Markdown, with tables, code and links between guides", async ({ page, consoleErrors }, testInfo) => {
  // the unknown guide it opens last answers 404, which the browser logs
  consoleErrors.allow(/status of 404 \(Not Found\) \(http:\/\/[^/]+\/docs\/\.\.%2FREADME:/);
  await signInAsOperator(page, testInfo);
  await page.getByRole("navigation", { name: "Console" }).getByRole("link", { name: "Docs" }).click();
  await expect(page).toHaveURL(/\/docs$/);
  await expect(page.getByTestId("docs-index").getByRole("link")).toHaveCount(4);

  for (const guide of GUIDES) {
    await page.goto(`/docs/${guide.slug}`);
    await expect(page).toHaveTitle(new RegExp(`${guide.title} · Idemgate`));
    const article = page.getByTestId("guide");
    await expect(article.getByRole("heading", { level: 1, name: guide.title })).toBeVisible();
    await expect(article.getByRole("heading", { level: 2, name: guide.section })).toBeVisible();
    // GitHub-flavoured tables became tables, not pipes in a paragraph
    expect(await article.locator("table").count()).toBeGreaterThan(0);
    await expect(article).not.toContainText("|---|");
    await shot(page, testInfo, `docs-${guide.slug}`);
  }

  // the write-order diagram: its Mermaid source, labelled
  await page.goto("/docs/concepts");
  // the write order of a call through Idemgate, then of a guarded function (runs: client)
  await expect(page.locator('figure[data-language="mermaid"]')).toHaveCount(2);
  const diagram = page.locator('figure[data-language="mermaid"]').first();
  await expect(diagram).toContainText("sequenceDiagram");
  await expect(diagram.locator("figcaption")).toContainText("Mermaid");

  // a link to a section of another guide lands on that section's console page
  await page.getByTestId("guide").getByRole("link", { name: "Operate" }).first().click();
  await expect(page).toHaveURL(/\/docs\/operate$/);
  await page.goto("/docs/concepts");
  await page.getByTestId("guide").locator('a[href="/docs/operate#what-each-audit-mode-can-lose"]').click();
  await expect(page).toHaveURL(/\/docs\/operate#what-each-audit-mode-can-lose$/);
  await expect(page.locator("#what-each-audit-mode-can-lose")).toBeInViewport();

  // the alert rules are a code block to copy, and the side navigation reaches the API reference
  await expect(page.getByTestId("guide").locator('figure[data-language="yaml"]').filter({ hasText: "IdemgateUnknownOutcomes" })).toHaveCount(1);
  await page.getByRole("navigation", { name: "Docs" }).getByRole("link", { name: "API reference" }).click();
  await expect(page).toHaveTitle(/API reference · Idemgate/);

  // an unknown guide is a 404, not a file read
  const missing = await page.goto("/docs/..%2FREADME");
  expect(missing?.status()).toBe(404);
});
