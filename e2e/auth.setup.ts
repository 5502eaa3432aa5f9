import { test as setup } from "./fixtures";
import { seededCredentials, sessionFile, signInThroughForm, VIEWER } from "./auth";

// Signs the operator and the viewer in once per server, through the form, and keeps each session
// for signIn() (e2e/auth.ts) to hand to the tests' pages: one password hash each instead of one per test.
setup("sign in the operator and the viewer once", async ({ browser }, testInfo) => {
  // two password hashes (argon2) on a busy machine, and on the redis-down server each page waits out its key-store probe
  setup.setTimeout(120_000);
  for (const [role, account] of [["operator", seededCredentials(testInfo)], ["viewer", VIEWER]] as const) {
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await signInThroughForm(page, account);
      await context.storageState({ path: sessionFile(testInfo, role) });
    } finally {
      await context.close();
    }
  }
});
