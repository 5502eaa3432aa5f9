import { expect, test } from "./fixtures";
import { signIn } from "./sign-in";
import { SCREENSHOTS } from "./screenshots";

// Runs against the server whose REDIS_URL points at a closed port (project "redis-down").

test("the status page says the key store is unreachable, and why", async ({ page }, testInfo) => {
  await signIn(page, testInfo);
  await page.goto("/status");

  await expect(page.getByTestId("overall-status")).toHaveAttribute("data-status", "degraded");
  await expect(page.getByTestId("overall-status")).toHaveText("Degraded: key store unreachable");
  await expect(page.getByTestId("keystore-kind")).toHaveAttribute("data-kind", "redis");
  await expect(page.getByTestId("keystore-status")).toHaveText("Unreachable");
  // refused at once, or still retrying when the 2 s probe gives up: either way a readable reason
  await expect(page.getByTestId("keystore-error")).toContainText(/no connection|no answer within 2000 ms/);
  await expect(page.getByTestId("keystore-error")).toContainText("REDIS_URL");
  await expect(page.getByTestId("database-status")).toHaveText("Reachable");

  if (SCREENSHOTS) await page.screenshot({ path: `e2e/screenshots/status-${testInfo.project.name}.png`, fullPage: true, animations: "disabled" });
});

test("GET /api/health answers 503: the status to anyone, the key store's error to a signed-in operator", async ({ page, request }, testInfo) => {
  const anonymous = await request.get("/api/health");
  expect(anonymous.status()).toBe(503);
  expect(await anonymous.json()).toEqual({ status: "degraded" });

  await signIn(page, testInfo);
  const res = await page.request.get("/api/health");
  expect(res.status()).toBe(503);
  expect(await res.json()).toMatchObject({
    status: "degraded",
    keyStore: { kind: "redis", ok: false, location: "redis://127.0.0.1:1" },
    database: { kind: "pglite", ok: true },
  });
});
