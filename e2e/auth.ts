import { readFileSync } from "node:fs";
import path from "node:path";
import { expect, test, type BrowserContext, type Page, type TestInfo } from "@playwright/test";

import { VIEWER } from "./accounts";

export { VIEWER };

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

/** Where the setup project keeps a server's signed-in session for an account (e2e/auth.setup.ts). */
export function sessionFile(testInfo: TestInfo, role: "operator" | "viewer"): string {
  const { dataDir } = testInfo.project.metadata as { dataDir: string };
  const root = path.dirname(testInfo.config.configFile ?? "playwright.config.ts");
  return path.resolve(root, ".data", "e2e-sessions", `${path.basename(dataDir)}-${role}.json`);
}

/** Signs in through the login form: a test about signing in, or when no session was kept. */
export async function signInThroughForm(page: Page, account: { email: string; password: string }, next?: string): Promise<void> {
  await page.goto(next ? `/login?next=${encodeURIComponent(next)}` : "/login");
  await page.getByLabel("Email").fill(account.email);
  await page.getByLabel("Password").fill(account.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByTestId("sign-out")).toBeVisible();
}

/**
 * Signs the page in as `account` and opens `next` (default the overview): with the session the
 * setup project kept for this server and account (no password hash), else through the form.
 * The page's other cookies go (one account per page); the `request` fixture stays anonymous.
 */
export async function signIn(page: Page, account: { email: string; password: string }, next?: string): Promise<void> {
  const testInfo = test.info();
  const role = account.email === VIEWER.email ? "viewer" : "operator";
  let kept: { cookies: Parameters<BrowserContext["addCookies"]>[0] } | null = null;
  try {
    kept = JSON.parse(readFileSync(sessionFile(testInfo, role), "utf8"));
  } catch {
    kept = null; // no setup run (e.g. --no-deps): sign in through the form
  }
  if (!kept || (role === "operator" && account.email !== seededCredentials(testInfo).email)) {
    return signInThroughForm(page, account, next);
  }
  await page.context().clearCookies();
  await page.context().addCookies(kept.cookies);
  await page.goto(next ?? "/");
  await expect(page.getByTestId("sign-out")).toBeVisible();
}

export async function signInAsOperator(page: Page, testInfo: TestInfo, next?: string): Promise<SeededCredentials> {
  const creds = seededCredentials(testInfo);
  await signIn(page, creds, next);
  return creds;
}
