import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { expect, test, type APIRequestContext, type Page } from "./fixtures";
import { removeDataDir, startServer, type RunningServer } from "../test/support/server";
import { seededCredentials, signInAsOperator, signInThroughForm } from "./auth";
import { testPort } from "../scripts/test-ports.mjs";
import environments from "./environments.mjs";

// Findings of a security review, each checked from outside against both server configurations
// (projects "embedded" and "servers"): open redirects after sign-in, keys decoded twice, framing,
// operators' emails reaching tenants, problem pages of inherited property names, and the
// same-origin check of cookie-authenticated mutations.

const RUN = Date.now().toString(36);
let seq = 0;

const charge = (customerId: string, outcome = "crash_after_effect") => ({ customerId, amountCents: 700, currency: "EUR", simulate: { outcome } });

function invoke(request: APIRequestContext, token: string, key: string, args: unknown) {
  return request.post("/api/v1/tools/payments.charge/invoke", { headers: { Authorization: `Bearer ${token}`, "Idempotency-Key": key }, data: args });
}

/** A crashed call: its key stays held (inflight, stuck after the e2e servers' 3 s lease). */
async function crashed(request: APIRequestContext, token: string, key: string) {
  const res = await invoke(request, token, key, charge(`cus-sec-${RUN}`));
  expect(res.status(), key).toBe(500);
}

const apiKeyPath = (key: string) => `/api/v1/keys/demo/${encodeURIComponent(key)}`;

async function tenantKey(request: APIRequestContext, token: string, key: string) {
  const res = await request.get(apiKeyPath(key), { headers: { Authorization: `Bearer ${token}` } });
  expect(res.status(), key).toBe(200);
  return (await res.json()) as { key: string; state: string; record: { key: string } | null; timeline: Record<string, unknown>[] };
}

// ---------------------------------------------------------------------------------------------
// Open redirect after sign-in

test("sign-in with a next that dot-segments turn into //evil.example lands on the console", async ({ page, baseURL }, testInfo) => {
  const creds = seededCredentials(testInfo);
  const hostile = "/login?next=%2F.%2F%2Fevil.example";
  await page.goto(hostile);
  await page.getByLabel("Email").fill(creds.email);
  await page.getByLabel("Password").fill(creds.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByTestId("sign-out")).toBeVisible();
  expect(new URL(page.url()).origin).toBe(new URL(baseURL!).origin);
  expect(new URL(page.url()).pathname).toBe("/");

  // signed in, the sign-in page sends the operator on at once: to the console too
  for (const next of ["%2F.%2F%2Fevil.example", "%2F%2e%2e%2F%2Fevil.example", "%2F.%2F%5Cevil.example", "%2F%09%2Fevil.example"]) {
    const res = await page.request.get(`/login?next=${next}`, { maxRedirects: 0 });
    expect(res.status(), next).toBe(307);
    expect(res.headers().location, next).toBe("/");
  }
  await page.goto(hostile);
  await expect(page.getByTestId("sign-out")).toBeVisible();
  expect(new URL(page.url()).origin).toBe(new URL(baseURL!).origin);
});

// ---------------------------------------------------------------------------------------------
// Keys with characters that mean something in a URL, each decoded exactly once

/** Keys holding `%`, `%41`, `/`, `+`, `#`, `?`, spaces and percent-escaped non-ASCII (valid printable ASCII keys all). */
const hostileKeys = (label: string) => [
  `order%41-1-${label}-${RUN}`,
  `100%-${label}-${RUN}`,
  `a/b/../c-${label}-${RUN}`,
  `p+q-${label}-${RUN}`,
  `h#1-${label}-${RUN}`,
  `q?x=1&y-${label}-${RUN}`,
  `sp ace-${label}-${RUN}`,
  `caf%C3%A9-${label}-${RUN}`,
  `%2F%2e%2e%25-${label}-${RUN}`,
];
/** What `order%41-1-…` would name if it were decoded once more. */
const decoyOf = (label: string) => `orderA-1-${label}-${RUN}`;

test("the API reads and releases exactly the key asked for, whatever it holds", async ({ page, request, baseURL }, testInfo) => {
  test.setTimeout(60_000);
  const { apiToken } = await signInAsOperator(page, testInfo);
  const keys = hostileKeys("api");
  const decoy = decoyOf("api");
  await crashed(request, apiToken, decoy);
  for (const key of keys) await crashed(request, apiToken, key);

  for (const key of keys) {
    const detail = await tenantKey(request, apiToken, key);
    expect(detail.key).toBe(key);
    expect(detail.record?.key).toBe(key);
  }
  for (const key of keys) {
    const res = await page.request.post(`${apiKeyPath(key)}/release`, { headers: { Origin: baseURL! }, data: { reason: "security e2e", force: true } });
    expect(res.status(), key).toBe(200);
    expect(((await res.json()) as { before: { key: string } }).before.key).toBe(key);
    expect((await tenantKey(request, apiToken, key)).state).toBe("absent");
  }
  // releasing order%41-1 left orderA-1 held
  expect((await tenantKey(request, apiToken, decoy)).state).not.toBe("absent");

  // a tool segment is decoded once too (the gateway's fast path reads the URL itself)
  const once = await request.post("/api/v1/tools/payments%2Echarge/invoke", { headers: { Authorization: `Bearer ${apiToken}`, "Idempotency-Key": `sec-tool-${RUN}` }, data: charge(`cus-sec-${RUN}`, "ok") });
  expect(once.status()).toBe(200);
  const twice = await request.post("/api/v1/tools/payments%252Echarge/invoke", { headers: { Authorization: `Bearer ${apiToken}`, "Idempotency-Key": `sec-tool-2-${RUN}` }, data: charge(`cus-sec-${RUN}`, "ok") });
  expect(twice.status()).toBe(404);
});

test("the console opens a key holding such characters from its list and releases that key only", async ({ page, request }, testInfo) => {
  test.setTimeout(120_000);
  const { apiToken } = await signInAsOperator(page, testInfo);
  const keys = hostileKeys("ui");
  const decoy = decoyOf("ui");
  for (const key of keys) await crashed(request, apiToken, key);
  await crashed(request, apiToken, decoy);
  await expect.poll(async () => (await tenantKey(request, apiToken, decoy)).state, { timeout: 15_000 }).toBe("stuck");

  for (const key of keys) {
    // opened by its address
    await page.goto(`/keys/demo/${encodeURIComponent(key)}`);
    await expect(page.getByTestId("key-name")).toHaveText(key);
    // the window's title names the same key (Next.js hands metadata its params decoded already)
    await expect(page).toHaveTitle(`Key ${key} · Idemgate`);
    // the list links to the key page, each segment encoded once
    await page.goto(`/keys?prefix=${encodeURIComponent(key)}`);
    await page.getByRole("link", { name: key, exact: true }).click();
    await expect(page.getByTestId("key-name")).toHaveText(key);
    await expect(page.getByTestId("key-state")).toHaveText("stuck");
    await page.getByTestId("release-button").click();
    const dialog = page.getByTestId("release-dialog");
    await dialog.getByTestId("reason-input").fill("security e2e: released from the console");
    await dialog.getByTestId("confirm-release").click();
    await expect(dialog).toBeHidden();
    await expect(page.getByTestId("key-state")).toHaveText("absent");
    expect((await tenantKey(request, apiToken, key)).state).toBe("absent");
  }
  await page.goto(`/keys/demo/${encodeURIComponent(decoy)}`);
  await expect(page.getByTestId("key-name")).toHaveText(decoy);
  await expect(page.getByTestId("key-state")).toHaveText("stuck");
});

// ---------------------------------------------------------------------------------------------
// Framing and content sniffing

const SECURITY_HEADERS = {
  "x-frame-options": "DENY",
  "x-content-type-options": "nosniff",
  "referrer-policy": "strict-origin-when-cross-origin",
};

function expectSecurityHeaders(headers: Record<string, string>, what: string) {
  for (const [name, value] of Object.entries(SECURITY_HEADERS)) expect(headers[name], `${name} on ${what}`).toBe(value);
  expect(headers["content-security-policy"], `content-security-policy on ${what}`).toMatch(/(^|;)\s*frame-ancestors 'none'\s*(;|$)/);
}

test("every answer forbids framing and sniffing: pages, redirects, the API, the gateway's fast path", async ({ page, request }, testInfo) => {
  const { apiToken } = seededCredentials(testInfo);
  const anonymous = [
    "/login",
    "/keys",
    "/problems/conflict",
    "/problems/no-such-problem",
    "/api/health",
    "/api/v1/keys",
    "/api/v1/openapi.json",
    "/no-such-page",
  ];
  for (const path of anonymous) {
    const res = await request.get(path, { maxRedirects: 0 });
    expectSecurityHeaders(res.headers(), `GET ${path} (${res.status()})`);
  }
  // answered by node:http itself (lib/gateway/fast-invoke.ts), not by Next.js
  const ok = await invoke(request, apiToken, `sec-headers-${RUN}`, charge(`cus-sec-${RUN}`, "ok"));
  expect(ok.status()).toBe(200);
  expectSecurityHeaders(ok.headers(), "the fast path's 200");
  const replay = await invoke(request, apiToken, `sec-headers-${RUN}`, charge(`cus-sec-${RUN}`, "ok"));
  expect(replay.headers()["idempotent-replayed"]).toBe("true");
  expectSecurityHeaders(replay.headers(), "the fast path's replay");
  const refused = await request.post("/api/v1/tools/payments.charge/invoke", { headers: { Authorization: "Bearer idg_not-a-token" }, data: {} });
  expect(refused.status()).toBe(401);
  expectSecurityHeaders(refused.headers(), "the fast path's 401");

  await signInAsOperator(page, testInfo);
  for (const path of ["/", "/keys", "/tools/payments.charge", "/anomalies", "/audit", "/status"]) {
    const res = await page.request.get(path, { maxRedirects: 0 });
    expect(res.status(), path).toBe(200);
    expectSecurityHeaders(res.headers(), `the console's ${path}`);
  }
  const keys = await page.request.get("/api/v1/keys?limit=1");
  expect(keys.status()).toBe(200);
  expectSecurityHeaders(keys.headers(), "an operator's API read");
});

test("a page on another port that frames the keys page gets nothing: the frame stays blocked", async ({ page, baseURL, consoleErrors }, testInfo) => {
  // the browser says it blocked the frame: what this test wants
  consoleErrors.allow(/violates the following Content Security Policy directive: "frame-ancestors 'none'"/);
  await signInAsOperator(page, testInfo);
  const target = `${baseURL}/keys`;
  // same site (127.0.0.1), another origin: the session cookie goes along with the frame's request
  const framer: Server = createServer((_req, res) => {
    res.writeHead(200, { "Content-Type": "text/html" });
    res.end(`<!doctype html><title>framer</title><iframe id="console" src="${target}" width="1000" height="600"></iframe>`);
  });
  await new Promise<void>((resolve) => framer.listen(0, "127.0.0.1", resolve));
  try {
    const framed = page.waitForResponse((res) => res.url() === target);
    await page.goto(`http://127.0.0.1:${(framer.address() as AddressInfo).port}/`);
    const response = await framed;
    // the console answered the framed request (with the signed-in page) and told the browser not to show it
    expect(response.status()).toBe(200);
    expect(response.headers()["x-frame-options"]).toBe("DENY");
    const frame = page.frames().find((f) => f !== page.mainFrame());
    expect(frame).toBeDefined();
    await expect.poll(() => frame!.url()).not.toBe(target);
    await expect(page.frameLocator("#console").getByTestId("sign-out")).toHaveCount(0);
    await expect(page.frameLocator("#console").getByText("Release all")).toHaveCount(0);
  } finally {
    framer.closeAllConnections();
    await new Promise((resolve) => framer.close(resolve));
  }
});

// ---------------------------------------------------------------------------------------------
// Who called, as a tenant sees it

test("a call made from the console's invoke form shows its tenant an operator, not the operator's email", async ({ page, request, baseURL }, testInfo) => {
  const { apiToken, email } = await signInAsOperator(page, testInfo);
  const key = `sec-console-call-${RUN}`;
  const res = await page.request.post("/api/v1/console/invoke", {
    headers: { Origin: baseURL! },
    data: { tool: "payments.charge", scope: "demo", key, arguments: JSON.stringify(charge(`cus-sec-${RUN}`, "ok")) },
  });
  expect(res.status()).toBe(200);
  expect(((await res.json()) as { response: { status: number } }).response.status).toBe(200);
  // the tenant replays it under its token: its own call is a suppression with its own caller
  expect((await invoke(request, apiToken, key, charge(`cus-sec-${RUN}`, "ok"))).headers()["idempotent-replayed"]).toBe("true");

  const tenant = await request.get(apiKeyPath(key), { headers: { Authorization: `Bearer ${apiToken}` } });
  expect(tenant.status()).toBe(200);
  const text = await tenant.text();
  expect(text).not.toContain(email);
  const timeline = ((JSON.parse(text) as { timeline: { type: string; caller?: string | null }[] }).timeline);
  expect(timeline.find((e) => e.type === "intent")?.caller).toBe("operator");

  // operators still see who it was
  const operator = await page.request.get(apiKeyPath(key));
  const seen = (await operator.json()) as { timeline: { type: string; caller?: string | null }[] };
  expect(seen.timeline.find((e) => e.type === "intent")?.caller).toBe(`operator:${email}`);
});

// ---------------------------------------------------------------------------------------------
// Names that are properties of every object

test("problem pages and tools named after inherited properties are not found", async ({ page, request, consoleErrors }, testInfo) => {
  // the not-found pages it opens answer 404, which the browser logs
  consoleErrors.allow(/status of 404 \(Not Found\) \(http:\/\/[^/]+\/problems\//);
  const { apiToken } = seededCredentials(testInfo);
  for (const name of ["constructor", "__proto__", "toString", "hasOwnProperty", "valueOf", "%", "%25", "%E0%A4%A"]) {
    const res = await request.get(`/problems/${name}`);
    expect(res.status(), `/problems/${name}`).toBe(404);
    expect(await res.text(), `/problems/${name}`).not.toContain('data-testid="problem-doc"');
  }
  const known = await request.get("/problems/conflict");
  expect(known.status()).toBe(200);

  // the console's not-found page
  await page.goto("/problems/constructor");
  await expect(page.getByTestId("problem-doc")).toHaveCount(0);
  await expect(page.getByText(/not found|could not be found/i).first()).toBeVisible();

  // the API form: problem+json 404, also for a path that is not valid percent-encoding
  for (const path of ["/api/v1/keys/demo/%", "/api/v1/keys/demo/100%", "/api/v1/anomalies/%E0%A4%A"]) {
    const res = await request.get(path, { headers: { Authorization: `Bearer ${apiToken}` } });
    expect(res.status(), path).toBe(404);
    expect(res.headers()["content-type"], path).toMatch(/^application\/problem\+json/);
  }
  await page.goto("/problems/%");
  await expect(page.getByText(/could not be found/i).first()).toBeVisible();
  for (const name of ["constructor", "__proto__", "toString", "hasOwnProperty"]) {
    const res = await request.post(`/api/v1/tools/${name}/invoke`, { headers: { Authorization: `Bearer ${apiToken}`, "Idempotency-Key": `sec-${name}-${RUN}` }, data: {} });
    expect(res.status(), name).toBe(404);
    expect(res.headers()["content-type"]).toMatch(/^application\/problem\+json/);
    expect(((await res.json()) as { type: string }).type).toBe("/problems/unknown_tool");
  }
});

// ---------------------------------------------------------------------------------------------
// The same-origin check of cookie-authenticated mutations

/** An operator's release of a held key, with the given request headers; the status it got. */
async function releaseWith(page: Page, base: string, key: string, headers: Record<string, string>): Promise<number> {
  const res = await page.request.post(`${base}${apiKeyPath(key)}/release`, { headers, data: { reason: "security e2e: origin check", force: true } });
  return res.status();
}

test("without a trusted proxy the origin is this server's own scheme, host and port; forwarded headers are the client's and ignored", async ({ page, request, baseURL }, testInfo) => {
  const { apiToken } = await signInAsOperator(page, testInfo);
  const key = `sec-origin-${RUN}-${++seq}`;
  await crashed(request, apiToken, key);
  const own = new URL(baseURL!);

  // a forged X-Forwarded-Host with a matching Origin
  expect(await releaseWith(page, baseURL!, key, { Origin: "http://evil.example", "X-Forwarded-Host": "evil.example" })).toBe(403);
  // the right host, the wrong scheme (this server speaks http)
  expect(await releaseWith(page, baseURL!, key, { Origin: `https://${own.host}` })).toBe(403);
  expect(await releaseWith(page, baseURL!, key, { Origin: `https://${own.host}`, "X-Forwarded-Proto": "https" })).toBe(403);
  // another port of the same host
  expect(await releaseWith(page, baseURL!, key, { Origin: `http://${own.hostname}:${Number(own.port) + 1000}` })).toBe(403);
  expect(await releaseWith(page, baseURL!, key, {})).toBe(403);
  expect((await tenantKey(request, apiToken, key)).state).not.toBe("absent");
  // this origin is accepted, whatever the client claims a proxy said
  expect(await releaseWith(page, baseURL!, key, { Origin: own.origin, "X-Forwarded-Host": "evil.example", "X-Forwarded-Proto": "https" })).toBe(200);
  expect((await tenantKey(request, apiToken, key)).state).toBe("absent");
});

test.describe("behind a trusted proxy (IDEMGATE_TRUSTED_PROXY=1)", () => {
  // A second server of this project's configuration (the same Redis and PostgreSQL for "servers",
  // its own embedded database otherwise) that trusts one proxy in front of it.
  let proxied: RunningServer;
  let creds: { email: string; password: string; apiToken: string };

  test.beforeAll(async ({}, testInfo) => {
    testInfo.setTimeout(180_000);
    const servers = testInfo.project.name === "servers";
    const port = testPort(servers ? 3127 : 3126);
    const dataDir = `.data/e2e-${testInfo.project.name}-trusted-proxy`;
    await removeDataDir(dataDir);
    const { redisUrl, redisPrefix, databaseUrl } = environments.servers;
    proxied = await startServer({
      port,
      dataDir,
      env: {
        IDEMGATE_TRUSTED_PROXY: "1",
        IDEMGATE_DEMO_LEASE_MS: "3000",
        IDEMGATE_RECONCILE_INTERVAL_MS: "0",
        ...(servers ? { REDIS_URL: redisUrl, IDEMGATE_REDIS_PREFIX: redisPrefix, DATABASE_URL: databaseUrl } : {}),
      },
    });
    // with the shared databases the accounts are the ones the project's server seeded
    creds = servers ? seededCredentials(testInfo) : await proxied.credentials();
  });

  test.afterAll(async () => {
    await proxied?.stop();
  });

  test("the forwarded host and scheme are the origin the browser used", async ({ browser, request }) => {
    const context = await browser.newContext({ baseURL: proxied.url });
    const page = await context.newPage();
    try {
      // its own server: the session the setup project kept belongs to another one
      await signInThroughForm(page, creds);
      const key = `sec-proxied-${RUN}-${++seq}`;
      const res = await request.post(`${proxied.url}/api/v1/tools/payments.charge/invoke`, {
        headers: { Authorization: `Bearer ${creds.apiToken}`, "Idempotency-Key": key },
        data: charge(`cus-sec-${RUN}`),
      });
      expect(res.status()).toBe(500);
      const proxy = { "X-Forwarded-Host": "console.example", "X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.7" };

      // the scheme counts: the proxy says the browser used https
      expect(await releaseWith(page, proxied.url, key, { ...proxy, Origin: "http://console.example" })).toBe(403);
      // the proxy's host, not the server's own address
      expect(await releaseWith(page, proxied.url, key, { ...proxy, Origin: proxied.url })).toBe(403);
      expect(await releaseWith(page, proxied.url, key, { ...proxy, Origin: "https://console.example:8443" })).toBe(403);
      expect(await releaseWith(page, proxied.url, key, { ...proxy, Origin: "https://console.example" })).toBe(200);
    } finally {
      await context.close();
    }
  });
});
