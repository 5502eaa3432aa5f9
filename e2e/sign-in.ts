import type { Page, TestInfo } from "@playwright/test";
import { signInAsOperator } from "./auth";

/**
 * Signs in as the operator the server seeded on its first start (its credentials are in
 * <dataDir>/credentials.txt, named by the project's metadata), with the session the setup project
 * kept (e2e/auth.ts).
 */
export async function signIn(page: Page, testInfo: TestInfo): Promise<void> {
  await signInAsOperator(page, testInfo);
}
