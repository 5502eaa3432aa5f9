import { randomUUID } from "node:crypto";
import { expect, test, type APIRequestContext, type Page, type TestInfo } from "./fixtures";
import { seededCredentials, signIn, signInAsOperator, VIEWER } from "./auth";
import { SCREENSHOTS } from "./screenshots";

const CHARGE = "payments.charge";

async function shot(page: Page, testInfo: TestInfo, name: string, dark = false) {
  if (!SCREENSHOTS) return;
  const project = testInfo.project.name;
  // a full-page shot of a scrolled page would paint the sticky header mid-page
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.mouse.move(0, 0); // no chart tooltip in the picture
  await page.screenshot({ path: `e2e/screenshots/${name}-${project}.png`, fullPage: true, animations: "disabled" });
  if (dark) {
    await page.emulateMedia({ colorScheme: "dark" });
    await page.screenshot({ path: `e2e/screenshots/${name}-${project}-dark.png`, fullPage: true, animations: "disabled" });
    await page.emulateMedia({ colorScheme: "light" });
  }
}

function invoke(request: APIRequestContext, token: string, key: string, args: unknown, headers: Record<string, string> = {}) {
  return request.post(`/api/v1/tools/${CHARGE}/invoke`, {
    headers: { Authorization: `Bearer ${token}`, "Idempotency-Key": key, "Idemgate-Session": "e2e-seed", ...headers },
    data: args,
  });
}

test("invoking payments.charge twice with one key shows the replay", async ({ page }, testInfo) => {
  await signInAsOperator(page, testInfo);
  await page.goto(`/tools/${CHARGE}`);

  const args = page.getByTestId("invoke-arguments");
  await expect(args).toHaveValue(/"customerId"/); // generated from the JSON Schema
  const key = page.getByTestId("invoke-key");
  await expect(key).toHaveValue(/^[0-9a-f-]{36}$/);
  const first = await key.inputValue();
  await page.getByTestId("invoke-new-key").click();
  await expect(key).not.toHaveValue(first);
  await key.fill(`e2e-form-${randomUUID()}`);
  await page.getByTestId("invoke-session").fill("e2e-form");

  await page.getByTestId("invoke-submit").click();
  const response = page.getByTestId("invoke-response");
  await expect(response).toHaveAttribute("data-status", "200");
  await expect(response).toHaveAttribute("data-replayed", "false");
  await expect(page.getByTestId("invoke-headers")).toContainText(`Idempotency-Key: ${await key.inputValue()}`);
  await expect(page.getByTestId("invoke-headers")).not.toContainText("Idempotent-Replayed");
  const body = JSON.parse(await page.getByTestId("invoke-body").innerText()) as { chargeId: string };
  expect(body.chargeId).toMatch(/^ch_/);

  await page.getByTestId("invoke-submit").click();
  await expect(response).toHaveAttribute("data-replayed", "true");
  await expect(page.getByTestId("invoke-headers")).toContainText("Idempotent-Replayed: true");
  await expect(page.getByTestId("invoke-status")).toHaveText("HTTP 200");
  // the same charge, not a second one
  expect((JSON.parse(await page.getByTestId("invoke-body").innerText()) as { chargeId: string }).chargeId).toBe(body.chargeId);
  await expect(page.getByTestId("invoke-history")).toContainText("200");

  // invalid arguments come back as the gateway's own problem, and nothing is reserved
  await page.getByTestId("invoke-new-key").click();
  await args.fill('{"customerId": "c1", "amountCents": -5, "currency": "usd"}');
  await page.getByTestId("invoke-submit").click();
  await expect(response).toHaveAttribute("data-status", "400");
  await expect(page.getByTestId("invoke-body")).toContainText("/problems/invalid_arguments");
  await expect(page.getByTestId("invoke-headers")).toContainText("Content-Type: application/problem+json");
  await page.getByRole("button", { name: "Reset example" }).click();
  await page.getByTestId("invoke-submit").click();
  await expect(response).toHaveAttribute("data-status", "200");
  await shot(page, testInfo, "tool-invoke");
});

test("the retry-gap histogram and the suggested TTL follow seeded replays", async ({ page, request }, testInfo) => {
  const { apiToken } = seededCredentials(testInfo);
  const args = { customerId: "cus_e2e_gaps", amountCents: 990, currency: "EUR" };

  // a burst of client retries right after the first call …
  const retried = `e2e-gaps-${randomUUID()}`;
  expect((await invoke(request, apiToken, retried, args)).status()).toBe(200);
  for (let i = 0; i < 22; i++) {
    const res = await invoke(request, apiToken, retried, args);
    expect(res.headers()["idempotent-replayed"]).toBe("true");
  }
  // … and a few duplicates of another action that come much later
  const late = `e2e-gaps-${randomUUID()}`;
  expect((await invoke(request, apiToken, late, args)).status()).toBe(200);
  await new Promise((r) => setTimeout(r, 2_500));
  for (let i = 0; i < 3; i++) expect((await invoke(request, apiToken, late, args)).headers()["idempotent-replayed"]).toBe("true");

  // a charge whose outcome is unknown, retried: the retry is suppressed as unknown
  const lost = `e2e-unknown-${randomUUID()}`;
  const lostArgs = { customerId: "cus_e2e_unknown", amountCents: 410, currency: "EUR", simulate: { outcome: "throw_after_effect" } };
  expect((await invoke(request, apiToken, lost, lostArgs)).status()).toBe(502);
  const held = await invoke(request, apiToken, lost, lostArgs);
  expect(held.status()).toBe(409);
  expect(((await held.json()) as { type: string }).type).toMatch(/\/problems\/outcome_unknown$/);
  // one action under two keys a model minted: the second is answered as a fresh-key duplicate
  const freshArgs = { customerId: `cus_e2e_fresh_${randomUUID().slice(0, 8)}`, amountCents: 320, currency: "EUR" };
  const model = { "Idemgate-Key-Source": "model" };
  expect((await invoke(request, apiToken, `e2e-fresh-${randomUUID()}`, freshArgs, model)).status()).toBe(200);
  expect((await invoke(request, apiToken, `e2e-fresh-${randomUUID()}`, freshArgs, model)).headers()["idempotent-replayed"]).toBe("true");

  await signInAsOperator(page, testInfo);
  await page.goto(`/tools/${CHARGE}?window=1h`);
  await expect(page.getByTestId("window-picker").getByRole("link", { name: "1h" })).toHaveAttribute("aria-current", "true");
  // every suppression kind is a stacked series with its legend entry; these two have bars now
  const chart = page.getByTestId("activity-chart");
  for (const [series, label] of [["unknown", "Unknown outcome"], ["fresh_key", "Fresh-key duplicates"], ["replay", "Replays"]]) {
    await expect(chart.locator(`li[data-series="${series}"]`)).toHaveText(label);
    await expect(chart.locator(`.recharts-bar.series-${series} .recharts-bar-rectangle path`).first()).toBeVisible();
  }
  await expect(page.getByTestId("gap-histogram")).toBeVisible();
  await expect(page.getByTestId("gap-histogram").locator(".recharts-bar-rectangle").first()).toBeVisible();
  await expect(page.getByTestId("suggested-ttl")).toHaveText(/^Suggested fallback TTL: [\d.]+ (ms|s|min|h)/);
  await expect(page.getByTestId("gap-reasoning")).toContainText("duplicates");
  await expect(page.getByTestId("gap-evidence")).toContainText("p99.9");
  await expect(page.getByTestId("activity-chart")).toBeVisible();

  // the suppression log links each duplicate to its key, segments encoded
  const row = page.getByTestId("suppression-row").filter({ hasText: late }).first();
  await expect(row).toBeVisible();
  await expect(row.getByRole("link")).toHaveAttribute("href", `/keys/demo/${encodeURIComponent(late)}`);
  await shot(page, testInfo, "tool-detail", true);

  // no label of the retry-gap chart is printed over another, wide or narrow: the axis' bounds and the markers' names
  for (const width of [1440, 390]) {
    await page.setViewportSize({ width, height: 900 });
    await expect(page.getByTestId("marker-stale")).toBeVisible();
    await expect(page.getByTestId("marker-ttl")).toBeVisible();
    await expect(async () => {
      // the x axis' bounds are the tick labels with a unit (100ms … 1d, ∞); the y axis' are plain counts
      // each list's boxes read in the page at once (a round trip per label took the 10 s on a loaded machine)
      const boxesOf = (elements: Element[]) => elements.map((e) => ({ text: e.textContent ?? "", ...e.getBoundingClientRect().toJSON() }) as { text: string; x: number; y: number; width: number; height: number });
      const rects = [
        ...(await page.getByTestId("gap-histogram").locator(".recharts-cartesian-axis-tick-value").evaluateAll(boxesOf)).filter((r) => /[a-z∞]/.test(r.text)),
        ...(await page.getByTestId("gap-markers").locator("li").evaluateAll(boxesOf)),
      ].filter((r) => r.width > 0);
      expect(rects.length).toBeGreaterThan(3);
      const overlaps: string[] = [];
      for (let i = 0; i < rects.length; i++) {
        for (let j = i + 1; j < rects.length; j++) {
          const [a, b] = [rects[i], rects[j]];
          if (a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height) overlaps.push(`${i}×${j}`);
        }
      }
      expect(overlaps, `labels overlapping at ${width} px`).toEqual([]);
    }).toPass({ timeout: 20_000 });
  }
  await shot(page, testInfo, "tool-detail-narrow", true);
  await page.setViewportSize({ width: 1280, height: 720 });

  await page.getByTestId("window-picker").getByRole("link", { name: "7d" }).click();
  await expect(page).toHaveURL(/window=7d/);
  await expect(page.getByTestId("gap-histogram")).toBeVisible();
});

test("the tools list shows every tool with its policy and links to its page", async ({ page, request }, testInfo) => {
  const { apiToken } = await signInAsOperator(page, testInfo);
  const res = await request.get("/api/v1/tools", { headers: { Authorization: `Bearer ${apiToken}` } });
  const { tools } = (await res.json()) as { tools: { name: string; kind: string }[] };
  expect(tools.length).toBeGreaterThan(0);

  await page.goto("/tools");
  await expect(page).toHaveTitle(/Tools · Idemgate/);
  for (const tool of tools) await expect(page.getByTestId(`tool-row-${tool.name}`)).toBeVisible();
  const charge = page.getByTestId(`tool-row-${CHARGE}`);
  await expect(charge).toContainText("1 d"); // the result TTL
  await expect(charge).toContainText("block");
  await expect(page.getByTestId("tool-row-tickets.create")).toContainText("1 min"); // its fallback dedupe
  await shot(page, testInfo, "tools-list");

  await charge.getByRole("link", { name: CHARGE }).click();
  await expect(page).toHaveURL(new RegExp(`/tools/${CHARGE.replace(".", "\\.")}$`));
  await expect(page.getByRole("heading", { level: 1 })).toHaveText(CHARGE);
  await expect(page.getByTestId("tool-policy")).toContainText("Lease");
});

test("a viewer sees the invoke form disabled, and the console route refuses it", async ({ page }, testInfo) => {
  await signIn(page, VIEWER);
  await page.goto(`/tools/${CHARGE}`);
  await expect(page.getByTestId("invoke-disabled")).toContainText("viewer");
  await expect(page.getByTestId("invoke-submit")).toBeDisabled();
  await expect(page.getByTestId("invoke-arguments")).toBeDisabled();

  const res = await page.request.post("/api/v1/console/invoke", {
    headers: { Origin: new URL(page.url()).origin },
    data: { tool: CHARGE, scope: "demo", key: randomUUID(), arguments: "{}" },
  });
  expect(res.status()).toBe(403);
  expect((await res.json()).type).toBe("/problems/forbidden");
  await shot(page, testInfo, "tool-viewer");
});

test("the console invoke route needs a session and the same origin", async ({ page, request }, testInfo) => {
  const anonymous = await request.post("/api/v1/console/invoke", { data: { tool: CHARGE, scope: "demo", arguments: "{}" } });
  expect(anonymous.status()).toBe(401);

  await signInAsOperator(page, testInfo);
  const crossSite = await page.request.post("/api/v1/console/invoke", {
    headers: { Origin: "https://evil.example" },
    data: { tool: CHARGE, scope: "demo", key: randomUUID(), arguments: "{}" },
  });
  expect(crossSite.status()).toBe(403);

  const badScope = await page.request.post("/api/v1/console/invoke", {
    headers: { Origin: new URL(page.url()).origin },
    data: { tool: CHARGE, scope: "no spaces", key: randomUUID(), arguments: "{}" },
  });
  expect(badScope.status()).toBe(400);
});

test("the API reference documents every tool and the problem types resolve", async ({ page, request }, testInfo) => {
  const { apiToken } = await signInAsOperator(page, testInfo);
  const { tools } = (await (await request.get("/api/v1/tools", { headers: { Authorization: `Bearer ${apiToken}` } })).json()) as {
    tools: { name: string; kind: string; idempotencyKey: string; source: string }[];
  };

  await page.goto("/docs/api");
  await expect(page).toHaveTitle(/API reference · Idemgate/);
  await expect(page.getByTestId("openapi-link")).toHaveAttribute("href", "/api/v1/openapi.json");
  for (const tool of tools) {
    const section = page.getByTestId(`api-tool-${tool.name}`);
    await expect(section).toBeVisible();
    // a tool that runs in the caller's process is reserved, not invoked
    await expect(section).toContainText(`/api/v1/tools/${tool.name}/${tool.source === "client" ? "reservations" : "invoke"}`);
    await expect(section.getByTestId("key-requirement")).toHaveText(tool.idempotencyKey);
    await expect(section.getByTestId("curl-example")).toContainText("$IDEMGATE_TOKEN");
  }
  const charge = page.getByTestId(`api-tool-${CHARGE}`);
  const argument = (name: string) => charge.getByTestId("argument-row").filter({ has: page.getByRole("cell", { name, exact: true }) });
  await expect(argument("amountCents")).toContainText("required");
  await expect(argument("amountCents")).toContainText("> 0");
  await expect(argument("currency")).toContainText("^[A-Z]{3}$");
  await expect(argument("simulate.outcome")).toContainText("optional");
  await expect(charge).toContainText("Idempotent-Replayed");
  await shot(page, testInfo, "api-reference");

  // the `type` of a real error is a page that explains it, without signing in
  const missingKey = await request.post(`/api/v1/tools/${CHARGE}/invoke`, {
    headers: { Authorization: `Bearer ${apiToken}` },
    data: { customerId: "c", amountCents: 1, currency: "USD" },
  });
  expect(missingKey.status()).toBe(400);
  const type = (await missingKey.json()).type as string;
  expect(type).toBe("/problems/missing_key");
  const doc = await request.get(type);
  expect(doc.status()).toBe(200);
  await page.getByTestId("problem-types").getByRole("link", { name: "/problems/missing_key" }).click();
  await expect(page.getByTestId("problem-doc")).toContainText("What to do");
  await expect(page.getByTestId("problem-doc")).toContainText("HTTP 400");
  await shot(page, testInfo, "problem-type");
});

test("a client-run tool's page says how it is guarded instead of offering the gateway's invoke form", async ({ page }, testInfo) => {
  await signInAsOperator(page, testInfo);
  await page.goto("/tools/ledger.record");
  await expect(page.getByRole("heading", { level: 1 })).toHaveText("ledger.record");
  await expect(page.getByTestId("invoke-card")).toHaveCount(0);
  const guarded = page.getByTestId("client-guard-card");
  await expect(guarded).toContainText("runs in its caller's process");
  await expect(guarded.getByRole("link", { name: "Guard a function where it runs" })).toHaveAttribute("href", "/docs/integrate#guard-a-function-where-it-runs");
  // the policy and the declaration say where it runs in the same words
  await expect(page.getByTestId("tool-policy")).toContainText("in the caller's process, guarded over the reservation API");
  await expect(page.getByTestId("tool-declaration")).toContainText("in the caller's process, guarded over the reservation API");
  await page.goto(`/tools/${CHARGE}`);
  await expect(page.getByTestId("invoke-card")).toBeVisible();
  await expect(page.getByTestId("tool-policy")).toContainText("in Idemgate's process");
  await expect(page.getByTestId("tool-policy")).not.toContainText("in process");
});

/** Elements in `selector` (and it) wider than the window, or scrolling sideways inside it */
function overflowing(page: Page, selector = "main") {
  return page.evaluate(
    (selector) =>
      [...document.querySelectorAll(`${selector}, ${selector} *`)]
        .filter((el) => {
          const style = getComputedStyle(el);
          // (a clipped box is caught by its width; a long key cut with an ellipsis is meant)
          const scrolls = (style.overflowX === "auto" || style.overflowX === "scroll") && el.scrollWidth > el.clientWidth + 1;
          return scrolls || el.getBoundingClientRect().right > window.innerWidth + 1;
        })
        .map((el) => `${el.tagName.toLowerCase()}${el.getAttribute("data-testid") ? `[${el.getAttribute("data-testid")}]` : ""}.${(el.className || "").toString().slice(0, 60)}`),
    selector,
  );
}

test("at 390 px the tool page and the keys table fit: outcome labels whole, the declaration unclipped, no sideways scroll", async ({ page, request }, testInfo) => {
  await page.setViewportSize({ width: 390, height: 844 });
  const { apiToken } = await signInAsOperator(page, testInfo);
  const key = `e2e-390-${randomUUID()}`;
  expect((await invoke(request, apiToken, key, { customerId: "cus_390", amountCents: 390, currency: "EUR" })).status()).toBe(200);
  await page.goto(`/tools/${CHARGE}`);
  await expect(page.getByTestId("stat-outcomes")).toBeVisible();
  // every outcome label is shown whole (not cut with an ellipsis)
  const labels = page.getByTestId("stat-outcomes").locator("dt");
  for (let i = 0; i < (await labels.count()); i++) {
    const cut = await labels.nth(i).evaluate((el) => el.scrollWidth > el.clientWidth);
    expect(cut, `outcome label ${await labels.nth(i).textContent()}`).toBe(false);
  }
  // the page is no wider than the window, and the declaration (with its schema) is neither clipped nor scrolls sideways
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
  expect(await overflowing(page, '[data-testid="tool-declaration"]')).toEqual([]);
  await shot(page, testInfo, "tool-390");

  await page.goto(`/keys?tool=${CHARGE}`);
  await expect(page.locator(`[data-testid="key-row"][data-key="${key}"]`)).toContainText(CHARGE);
  expect(await overflowing(page)).toEqual([]);
  await shot(page, testInfo, "keys-390");
});
