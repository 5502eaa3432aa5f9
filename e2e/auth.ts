import { readFileSync } from "node:fs";
import path from "node:path";
import { expect, type Page, type TestInfo } from "@playwright/test";

export { VIEWER } from "./accounts";

export interface SeededCredentials {
  email: string;
  password: string;
  apiToken: string;
}

/** What the server's first start wrote to <dataDir>/credentials.txt. */
export function seededCredentials(testInfo: TestInfo): SeededCredentials {
  // each project names its server's data directory in its metadata (playwright.config.ts)
  const { dataDir } = testInfo.project.metadata as { dataDir: string };
  const file = path.resolve(path.dirname(testInfo.config.configFile ?? "playwright.config.ts"), dataDir, "credentials.txt");
  const text = readFileSync(file, "utf8");
  const field = (label: string) => {
    const m = new RegExp(`${label}:\\s+(\\S+)`).exec(text);
    if (!m) throw new Error(`${file} has no "${label}" line`);
    return m[1];
  };
  return { email: field("operator"), password: field("password"), apiToken: field("API token") };
}

export async function signIn(page: Page, account: { email: string; password: string }, next?: string): Promise<void> {
  await page.goto(next ? `/login?next=${encodeURIComponent(next)}` : "/login");
  await page.getByLabel("Email").fill(account.email);
  await page.getByLabel("Password").fill(account.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByTestId("sign-out")).toBeVisible();
}

export async function signInAsOperator(page: Page, testInfo: TestInfo, next?: string): Promise<SeededCredentials> {
  const creds = seededCredentials(testInfo);
  await signIn(page, creds, next);
  return creds;
}
