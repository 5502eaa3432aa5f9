import { expect, test } from "./fixtures";
import { signIn } from "./sign-in";
import { CONFIG_SECRETS } from "./upstream";

// The e2e servers read e2e/idemgate.config.yaml (a copy in their data directory, IDEMGATE_CONFIG): its tool's page shows the
// effective declaration, secrets masked, and /status names the file.

test("a tool declared in the configuration file: its declaration with secrets masked, and the file on /status", async ({ page }, testInfo) => {
  await signIn(page, testInfo);
  await page.goto("/tools/crm.create_contact");
  const card = page.getByTestId("tool-declaration");
  await expect(card).toBeVisible();
  await expect(card).toContainText("idemgate.config.yaml, tools[0]");
  await expect(card).toContainText("forwarded to an HTTP service");
  await expect(card).toContainText("(30000 ms)");
  await expect(card).toContainText("(3600000 ms)");
  await expect(card).toContainText("block");
  await expect(card).toContainText("(10000 ms)");
  await expect(card).toContainText("redacted");
  // the query (with the API key) is not shown, nor is the header's value
  await expect(page.getByTestId("declaration-upstream-url")).toHaveText("POST http://127.0.0.1:4311/invoices");
  await expect(page.getByTestId("declaration-headers")).toHaveText("authorization: ••••••");
  const schema = JSON.parse((await page.getByTestId("declaration-input-schema").textContent()) ?? "null");
  expect(schema).toMatchObject({ type: "object", required: ["email"], properties: { email: { type: "string", format: "email" } } });
  const html = await page.content();
  expect(html).not.toContain(CONFIG_SECRETS.apiKey);
  expect(html).not.toContain(CONFIG_SECRETS.token);
  await card.scrollIntoViewIfNeeded();
  await page.screenshot({ path: `e2e/screenshots/tool-declaration-${testInfo.project.name}.png`, fullPage: true, animations: "disabled" });

  await page.goto("/status");
  const config = page.getByTestId("tool-config");
  await expect(config).toHaveAttribute("data-state", "loaded");
  await expect(page.getByTestId("tool-config-file")).toContainText(`${(testInfo.project.metadata as { dataDir: string }).dataDir}/idemgate.config.yaml`);
  await expect(page.getByTestId("tool-config-counts")).toHaveText("1 tool, 0 MCP servers");
  await expect(page.getByTestId("tool-config-error")).toHaveCount(0);
});
