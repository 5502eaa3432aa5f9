import { expect, test } from "./fixtures";
import { E2E_DATABASE } from "./environments.mjs";
import { signIn } from "./sign-in";
import { SCREENSHOTS } from "./screenshots";

// Each project's metadata names the stores its server is configured with (playwright.config.ts).
interface Expected {
  keyStore: "redis" | "postgres" | "pglite";
  database: "postgres" | "pglite";
}

test("the status page shows the configured stores, both reachable", async ({ page }, testInfo) => {
  const expected = testInfo.project.metadata as Expected;

  await signIn(page, testInfo);
  await page.goto("/status");
  await expect(page).toHaveTitle(/Status · Idemgate/);

  await expect(page.getByTestId("keystore-kind")).toHaveAttribute("data-kind", expected.keyStore);
  await expect(page.getByTestId("keystore-status")).toHaveText("Reachable");
  await expect(page.getByTestId("database-kind")).toHaveAttribute("data-kind", expected.database);
  await expect(page.getByTestId("database-status")).toHaveText("Reachable");
  await expect(page.getByTestId("overall-status")).toHaveAttribute("data-status", "ok");
  await expect(page.getByTestId("keystore-latency")).toHaveText(/^\d+(\.\d)? ms$/);
  await expect(page.getByTestId("database-latency")).toHaveText(/^\d+(\.\d)? ms$/);
  await expect(page.getByTestId("audit-mode")).toHaveText("durable");
  await expect(page.getByTestId("keystore-error")).toHaveCount(0);
  await expect(page.getByTestId("database-error")).toHaveCount(0);

  if (expected.keyStore === "redis") {
    await expect(page.getByTestId("keystore-location")).toHaveText("redis://127.0.0.1:6379");
  } else {
    await expect(page.getByTestId("keystore-location")).toHaveText("embedded");
  }
  if (expected.database === "postgres") {
    await expect(page.getByTestId("database-location")).toContainText(`/${E2E_DATABASE}`);
  }

  if (SCREENSHOTS) {
    const name = testInfo.project.name;
    await page.screenshot({ path: `e2e/screenshots/status-${name}.png`, fullPage: true, animations: "disabled" });
    await page.emulateMedia({ colorScheme: "dark" });
    await page.screenshot({ path: `e2e/screenshots/status-${name}-dark.png`, fullPage: true, animations: "disabled" });
  }
});

test("GET /api/health: the status to anyone, both stores' details to a signed-in operator", async ({ page, request }, testInfo) => {
  const expected = testInfo.project.metadata as Expected;
  const anonymous = await request.get("/api/health");
  expect(anonymous.status()).toBe(200);
  expect(await anonymous.json()).toEqual({ status: "ok" });

  await signIn(page, testInfo);
  // page.request carries the browser's session cookie
  const res = await page.request.get("/api/health");
  expect(res.status()).toBe(200);
  const body = await res.json();
  expect(body).toMatchObject({
    status: "ok",
    keyStore: { kind: expected.keyStore, ok: true },
    database: { kind: expected.database, ok: true },
    auditMode: "durable",
  });
  expect(JSON.stringify(body)).not.toMatch(/password|\*\*\*/);
});
