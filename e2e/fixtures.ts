import { test as base, expect, type BrowserContext, type ConsoleMessage } from "@playwright/test";

export { expect };
export type { APIRequestContext, APIResponse, Page, TestInfo } from "@playwright/test";

/**
 * Every spec takes `test` from here (scripts/check-layout.mjs checks it): a test fails when any page
 * it opened logged an error in the browser's console or threw an uncaught exception — a hydration
 * error, a failed request the page did not expect, a React warning logged as an error.
 *
 * A test that provokes one on purpose (a page it opens answers 404, say) names it first:
 * `consoleErrors.allow(/the server responded with a status of 404/)`.
 */
export interface ConsoleErrors {
  /** errors whose text matches are expected in this test */
  allow(pattern: RegExp): void;
}

interface Logged {
  url: string;
  text: string;
}

function describe(msg: ConsoleMessage): string {
  const where = msg.location();
  return where.url ? `${msg.text()} (${where.url}:${where.lineNumber})` : msg.text();
}

export const test = base.extend<{ consoleErrors: ConsoleErrors }>({
  consoleErrors: [
    async ({ context, browser }, use, testInfo) => {
      const logged: Logged[] = [];
      const allowed: RegExp[] = [];
      const watch = (ctx: BrowserContext) => {
        const onPage = (page: import("@playwright/test").Page) => {
          page.on("console", (msg) => {
            if (msg.type() === "error") logged.push({ url: page.url(), text: describe(msg) });
          });
          page.on("pageerror", (err) => logged.push({ url: page.url(), text: `uncaught ${err.name}: ${err.message}` }));
        };
        ctx.pages().forEach(onPage);
        ctx.on("page", onPage);
      };
      watch(context);
      // contexts a test opens itself are watched too
      const newContext = browser.newContext.bind(browser);
      browser.newContext = async (...args) => {
        const ctx = await newContext(...args);
        watch(ctx);
        return ctx;
      };
      try {
        await use({ allow: (pattern) => void allowed.push(pattern) });
      } finally {
        browser.newContext = newContext;
      }
      const unexpected = logged.filter((e) => !allowed.some((p) => p.test(e.text)));
      if (unexpected.length > 0) {
        await testInfo.attach("browser console errors", { body: JSON.stringify(unexpected, null, 2), contentType: "application/json" });
      }
      expect(unexpected, "errors in the browser's console (allow an expected one with consoleErrors.allow)").toEqual([]);
    },
    { auto: true },
  ],
});
