import { expect, test, type Request } from "./fixtures";
import { signInAsOperator } from "./auth";

// The worker's page is kept between tests (e2e/fixtures.ts): what one test leaves on it, the next must
// not see. The first test leaves all it can; the second, on the same page, finds it new.
test.describe.configure({ mode: "serial" });

let leftBehind: { url: string } | null = null;
let heardAfterItsTest = 0;
let itsTestEnded = false;

test("a test leaves cookies, storage, a route, a listener, a window size, a colour scheme and a second tab behind", async ({ page, context }, testInfo) => {
  await signInAsOperator(page, testInfo, "/keys");
  await page.evaluate(() => {
    localStorage.setItem("left-behind", "1");
    sessionStorage.setItem("left-behind", "1");
  });
  await context.grantPermissions(["clipboard-read"]);
  // a path the console never asks for itself: a request of the page's own to an aborted route would log an error
  await page.route("**/api/v1/left-behind", (route) => route.abort());
  page.on("request", () => {
    if (itsTestEnded) heardAfterItsTest++;
  });
  await page.setExtraHTTPHeaders({ "X-Left-Behind": "1" });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.emulateMedia({ colorScheme: "dark" });
  await context.newPage();
  leftBehind = { url: page.url() };
});

test("the next test's page is as a new context's would be", async ({ page, context, baseURL, consoleErrors }) => {
  consoleErrors.allow(/status of 40[14]/);
  expect(leftBehind, "the first test ran").not.toBeNull();
  itsTestEnded = true;
  expect(page.url()).toBe("about:blank");
  expect(context.pages()).toEqual([page]);
  expect(await context.cookies()).toEqual([]);
  expect(page.viewportSize()).toEqual({ width: 1280, height: 720 });

  // anonymous again: the console sends the page to sign in
  const asked: Request[] = [];
  page.on("request", (request) => {
    if (request.url().startsWith(`${baseURL}/login`)) asked.push(request);
  });
  await page.goto("/keys");
  await expect(page).toHaveURL(/\/login/);
  expect(asked.length, "requests for the sign-in page").toBeGreaterThan(0);
  for (const request of asked) expect((await request.allHeaders())["x-left-behind"]).toBeUndefined();
  expect(await page.evaluate(() => [localStorage.getItem("left-behind"), sessionStorage.getItem("left-behind")])).toEqual([null, null]);
  expect(await page.evaluate(() => matchMedia("(prefers-color-scheme: dark)").matches)).toBe(false);
  const permission = await page.evaluate(() => navigator.permissions.query({ name: "clipboard-read" as PermissionName }).then((p) => p.state));
  expect(permission).not.toBe("granted");
  // no route of the last test: the server answers (a route left behind would abort the request)
  const answer = await page.evaluate(() => fetch("/api/v1/left-behind").then((r) => r.status, () => "aborted"));
  expect(answer).not.toBe("aborted");
  expect(heardAfterItsTest, "requests heard by the last test's listener").toBe(0);
});
