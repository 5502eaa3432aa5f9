import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { expect, test, type APIRequestContext, type Page } from "@playwright/test";
import { removeDataDir, startServer, type RunningServer } from "../test/support/server";
import { seededCredentials, signIn, signInAsOperator } from "./auth";
import environments from "./environments.json" with { type: "json" };

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
