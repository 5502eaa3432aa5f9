import { readFile } from "node:fs/promises";
import path from "node:path";
import { expect, type Page, type TestInfo } from "@playwright/test";

/**
 * Signs in as the operator the server seeded on its first start, with the credentials it wrote to
 * <dataDir>/credentials.txt (each project names its server's data directory in its metadata).
 */
export async function signIn(page: Page, testInfo: TestInfo): Promise<void> {
  const { dataDir } = testInfo.project.metadata as { dataDir: string };
  const root = path.dirname(testInfo.config.configFile ?? path.join(process.cwd(), "playwright.config.ts"));
  const file = path.join(root, dataDir, "credentials.txt");
  const text = await readFile(file, "utf8");
  const email = /operator:\s+(\S+)/.exec(text)?.[1];
  const password = /password:\s+(\S+)/.exec(text)?.[1];
  if (!email || !password) throw new Error(`no operator credentials in ${file}`);

  await page.goto("/login");
  await page.getByLabel("Email").fill(email);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page).not.toHaveURL(/\/login/);
}
