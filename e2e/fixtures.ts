import { test as base, expect, type Browser, type BrowserContext, type BrowserContextOptions, type ConsoleMessage, type Page, type TestInfo, type WorkerInfo } from "@playwright/test";

export { expect };
export type { APIRequestContext, APIResponse, Page, Request, TestInfo } from "@playwright/test";

/**
 * Every spec takes `test` from here (scripts/check-layout.mjs checks it): a test fails when any page
 * it opened logged an error in the browser's console or threw an uncaught exception — a hydration
 * error, a failed request the page did not expect, a React warning logged as an error.
 *
 * A test that provokes one on purpose (a page it opens answers 404, say) names it first:
 * `consoleErrors.allow(/the server responded with a status of 404/)`.
 *
 * Each worker keeps one browser page for all its tests (`page`, and `context` its context), made as
 * fresh before every test: no cookies, no storage for the server's origin, no granted permissions,
 * the project's window size and colour scheme, no extra headers or routes, no other tab; after the
 * test it is left on about:blank, so nothing it showed keeps polling the server. A new page costs
 * Chromium a renderer process and a cold start of the console's scripts, about as much CPU as the
 * rest of a short test; the suite opens a couple of hundred. A context a test makes itself
 * (`browser.newContext()`) is its own, as before.
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


/** The context options a project's `use` gives (playwright.config.ts): what the built-in `context` would get. */
function contextOptions(workerInfo: WorkerInfo): BrowserContextOptions {
  const use = workerInfo.project.use as BrowserContextOptions;
  const { baseURL, viewport, userAgent, deviceScaleFactor, isMobile, hasTouch, locale, timezoneId, colorScheme } = use;
  const options = { baseURL, viewport, userAgent, deviceScaleFactor, isMobile, hasTouch, locale, timezoneId, colorScheme };
  // an option given as undefined is not Playwright's default (locale: undefined is the machine's, not en-US)
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined));
}

/** The worker's page: made on first use, made again when a test closed it or it crashed. */
class WorkerPage {
  private page: Page | null = null;

  constructor(
    private readonly browser: Browser,
    readonly options: BrowserContextOptions,
  ) {}

  async get(): Promise<Page> {
    if (this.page && !this.page.isClosed()) return this.page;
    await this.page?.context().close().catch(() => {});
    const context = await this.browser.newContext(this.options);
    const page = await context.newPage();
    page.once("crash", () => void page.close().catch(() => {}));
    this.page = page;
    return page;
  }

  async close(): Promise<void> {
    await this.page?.context().close().catch(() => {});
    this.page = null;
  }
}

/** What Page and BrowserContext inherit from Playwright's event emitter (its typings leave it out). */
interface Emitter {
  eventNames(): (string | symbol)[];
  listeners(name: string | symbol): ((...args: unknown[]) => void)[];
  off(name: string | symbol, listener: (...args: unknown[]) => void): unknown;
}

/** Listeners by event, so those a test added can be taken off again. */
function listenersOf(target: Page | BrowserContext): Map<string | symbol, Set<unknown>> {
  const emitter = target as unknown as Emitter;
  return new Map(emitter.eventNames().map((name) => [name, new Set<unknown>(emitter.listeners(name))]));
}

function removeAddedListeners(target: Page | BrowserContext, before: Map<string | symbol, Set<unknown>>): void {
  const emitter = target as unknown as Emitter;
  for (const name of emitter.eventNames()) {
    const kept = before.get(name);
    for (const listener of emitter.listeners(name)) {
      if (!kept?.has(listener)) emitter.off(name, listener);
    }
  }
}

/** The page as a new context would have it: nothing of the last test's left. */
async function resetPage(page: Page, options: BrowserContextOptions): Promise<void> {
  const context = page.context();
  await Promise.all(context.pages().filter((p) => p !== page).map((p) => p.close()));
  await context.clearCookies();
  await context.clearPermissions();
  await context.unrouteAll({ behavior: "ignoreErrors" });
  await page.unrouteAll({ behavior: "ignoreErrors" });
  if (options.baseURL) {
    const cdp = await context.newCDPSession(page);
    try {
      await cdp.send("Storage.clearDataForOrigin", {
        origin: new URL(options.baseURL).origin,
        storageTypes: "local_storage,session_storage,indexeddb,cache_storage,service_workers",
      });
    } finally {
      await cdp.detach();
    }
  }
  await page.setExtraHTTPHeaders({});
  await context.setOffline(false);
  // the last test's pointer would hover whatever the next page draws there
  await page.mouse.move(0, 0);
  if (options.viewport) await page.setViewportSize(options.viewport);
  await page.emulateMedia({ media: null, colorScheme: options.colorScheme ?? "light", reducedMotion: null, forcedColors: null });
}

async function screenshotOnFailure(page: Page, testInfo: TestInfo): Promise<void> {
  if (testInfo.status === testInfo.expectedStatus || page.isClosed() || page.url() === "about:blank") return;
  const body = await page.screenshot({ timeout: 5_000 }).catch(() => null);
  if (body) await testInfo.attach("screenshot", { body, contentType: "image/png" });
}

export const test = base.extend<{ consoleErrors: ConsoleErrors }, { workerPage: WorkerPage }>({
  workerPage: [
    async ({ browser }, use, workerInfo) => {
      const holder = new WorkerPage(browser, contextOptions(workerInfo));
      await use(holder);
      await holder.close();
    },
    { scope: "worker" },
  ],
  page: async ({ workerPage }, use, testInfo) => {
    let page = await workerPage.get();
    try {
      await resetPage(page, workerPage.options);
    } catch {
      // a page that cannot be reset (it hung, or its renderer went) is replaced by a new one
      await workerPage.close();
      page = await workerPage.get();
    }
    const pageListeners = listenersOf(page);
    const contextListeners = listenersOf(page.context());
    await use(page);
    await screenshotOnFailure(page, testInfo);
    if (page.isClosed()) return;
    removeAddedListeners(page, pageListeners);
    removeAddedListeners(page.context(), contextListeners);
    // leaving the console's page stops its polling; a page that will not leave is replaced next time
    await page.goto("about:blank", { timeout: 10_000 }).catch(() => workerPage.close());
  },
  context: async ({ page }, use) => {
    await use(page.context());
  },
  consoleErrors: [
    async ({ page, browser }, use, testInfo) => {
      const context = page.context();
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
