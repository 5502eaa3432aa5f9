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
