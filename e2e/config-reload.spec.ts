import { execFileSync } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { expect, test, type TestInfo } from "./fixtures";
import { signIn } from "./sign-in";

// SIGHUP with a broken configuration file: the server keeps the tools read before it, and /status
// says why. Each server reads its own copy of e2e/idemgate.config.yaml in its data directory
// (scripts/e2e.mjs puts it there), which this test breaks and then restores.

function serverFile(testInfo: TestInfo): string {
  const { dataDir } = testInfo.project.metadata as { dataDir: string };
  return path.join(path.dirname(testInfo.config.configFile ?? "playwright.config.ts"), dataDir, "idemgate.config.yaml");
}

/** SIGHUP to the server process listening on the project's port. */
function reload(testInfo: TestInfo): void {
  const port = new URL(String(testInfo.project.use.baseURL)).port;
  const pids = execFileSync("lsof", ["-t", "-sTCP:LISTEN", `-iTCP:${port}`], { encoding: "utf8" }).trim().split("\n").filter(Boolean);
  expect(pids).toHaveLength(1);
  process.kill(Number(pids[0]), "SIGHUP");
}

test("SIGHUP with a broken file: the old tools are still served and /status says why", async ({ page, request }, testInfo) => {
  const file = serverFile(testInfo);
  const good = await readFile(file, "utf8");
  await signIn(page, testInfo);
  try {
    await writeFile(file, good.replace("maxLength: 100", "maxLenght: 100"));
    reload(testInfo);
    await expect(async () => {
      await page.goto("/status");
      await expect(page.getByTestId("tool-config")).toHaveAttribute("data-state", "reload-refused", { timeout: 1_000 });
    }).toPass({ timeout: 15_000 });
    await expect(page.getByTestId("tool-config-error")).toContainText("tools[0].inputSchema.properties.name.maxLenght: is not a JSON Schema keyword");
    await expect(page.getByTestId("tool-config-error")).toContainText("the tools read before it are still served");
    await page.screenshot({ path: `e2e/screenshots/status-config-refused-${testInfo.project.name}.png`, fullPage: true, animations: "disabled" });
    const health = (await (await page.request.get("/api/health")).json()) as { toolConfig?: { reloadError: { message: string } | null } };
    expect(health.toolConfig?.reloadError?.message).toContain("maxLenght");
    // the tool is still served, with its schema
    await page.goto("/tools/crm.create_contact");
    await expect(page.getByTestId("tool-declaration")).toBeVisible();
    expect((await request.get("/api/v1/openapi.json")).status()).toBeLessThan(500);
  } finally {
    await writeFile(file, good);
    reload(testInfo);
  }
  await expect(async () => {
    await page.goto("/status");
    await expect(page.getByTestId("tool-config")).toHaveAttribute("data-state", "loaded", { timeout: 1_000 });
  }).toPass({ timeout: 15_000 });
});
