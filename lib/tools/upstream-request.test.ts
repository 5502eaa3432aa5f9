import { describe, expect, it } from "vitest";
import type { ToolContext } from "@/lib/idempotency/tool";
import type { UpstreamConfig } from "./define-tool";
import { derivedKey } from "./upstream";
import { buildUpstreamRequest, fitKey, formBody, RequestArgumentsError, requestArgumentIssues, urlTemplateProblem } from "./upstream-request";

const ctx: ToolContext = { scope: "acme", key: "order-42", session: null, executionId: "exec-1" };
const key = derivedKey("acme", "order-42");
const config = (over: Partial<UpstreamConfig>): UpstreamConfig => ({ url: "https://api.example/v1/orders", timeoutMs: 1_000, ...over });

describe("buildUpstreamRequest", () => {
  it("by default: POST, the arguments as JSON, the derived key as Idempotency-Key (the shape before these fields)", () => {
    const r = buildUpstreamRequest(config({}), { a: 1, b: { c: [2] } }, ctx, key);
    expect(r).toMatchObject({ method: "POST", url: "https://api.example/v1/orders", body: JSON.stringify({ a: 1, b: { c: [2] } }) });
    expect(r.headers.get("content-type")).toBe("application/json");
    expect(r.headers.get("idempotency-key")).toBe(key);
    expect(r.headers.get("idemgate-key")).toBe("order-42");
  });

  it("fills path templates with each value encoded as one segment ('/' and '?' included), and leaves them out of the body", () => {
    const r = buildUpstreamRequest(config({ url: "https://api.example/v1/customers/{customerId}/notes/{noteId}", method: "PATCH" }), { customerId: "a/b?c=d#e", noteId: 7, text: "hi" }, ctx, key);
    expect(r.method).toBe("PATCH");
    expect(r.url).toBe("https://api.example/v1/customers/a%2Fb%3Fc%3Dd%23e/notes/7");
    expect(new URL(r.url).pathname.split("/")).toEqual(["", "v1", "customers", "a%2Fb%3Fc%3Dd%23e", "notes", "7"]);
    expect(JSON.parse(r.body!)).toEqual({ text: "hi" });
  });

  it("query arguments go to the query string (encoded by URLSearchParams), not the body, unless repeated in it", () => {
    const c = config({ url: "https://api.example/v1/orders?version=2", query: ["expand", "dryRun", "absent"], repeatInBody: ["expand"] });
    const r = buildUpstreamRequest(c, { expand: "a&b=c", dryRun: false, amount: 5 }, ctx, key);
    const url = new URL(r.url);
    expect([...url.searchParams]).toEqual([["version", "2"], ["expand", "a&b=c"], ["dryRun", "false"]]);
    expect(JSON.parse(r.body!)).toEqual({ expand: "a&b=c", amount: 5 });
  });

  it("body: form nests as Stripe reads it: a[b][c]=…, items[0][price]=…, null as an empty value", () => {
    const r = buildUpstreamRequest(config({ body: "form" }), { amount: 2000, a: { b: { c: "x y" } }, items: [{ price: "p_1" }, "plain"], description: null, capture: true }, ctx, key);
    expect(r.headers.get("content-type")).toBe("application/x-www-form-urlencoded");
    expect(r.body).toBe("amount=2000&a%5Bb%5D%5Bc%5D=x+y&items%5B0%5D%5Bprice%5D=p_1&items%5B1%5D=plain&description=&capture=true");
    expect([...new URLSearchParams(r.body)]).toEqual([
      ["amount", "2000"],
      ["a[b][c]", "x y"],
      ["items[0][price]", "p_1"],
      ["items[1]", "plain"],
      ["description", ""],
      ["capture", "true"],
    ]);
  });

  it("body: none (the default for DELETE) sends no body and no content type", () => {
    for (const c of [config({ method: "DELETE", url: "https://api.example/v1/orders/{id}" }), config({ body: "none", url: "https://api.example/v1/orders/{id}" })]) {
      const r = buildUpstreamRequest(c, { id: "o_1", reason: "ignored" }, ctx, key);
      expect(r.body).toBeUndefined();
      expect(r.headers.get("content-type")).toBeNull();
    }
  });

  it("keyHeader carries the key instead of Idempotency-Key; keyMaxLength shortens it the same way every time", () => {
    const r = buildUpstreamRequest(config({ keyHeader: "PayPal-Request-Id", keyMaxLength: 32 }), {}, ctx, key);
    expect(r.headers.get("idempotency-key")).toBeNull();
    const sent = r.headers.get("paypal-request-id")!;
    expect(sent).toHaveLength(32);
    expect(sent).toBe(fitKey(key, 32));
    // all digest: the idg_ prefix is dropped first
    expect(key.startsWith(`idg_${sent}`)).toBe(true);
    expect(buildUpstreamRequest(config({ keyHeader: "PayPal-Request-Id", keyMaxLength: 32 }), {}, { ...ctx, key: "order-43" }, derivedKey("acme", "order-43")).headers.get("paypal-request-id")).not.toBe(sent);
    expect(fitKey(key, 64)).toBe(key);
  });

  it("a missing or non-scalar path argument is refused before anything is built", () => {
    const c = config({ url: "https://api.example/v1/orders/{id}", query: ["q"] });
    expect(requestArgumentIssues(c, {})).toEqual([{ path: "id", message: "is required: the URL's path names it ({id})" }]);
    expect(requestArgumentIssues(c, { id: { x: 1 }, q: [1] }).map((i) => i.path)).toEqual(["id", "q"]);
    expect(requestArgumentIssues(c, { id: "" })[0].message).toMatch(/must not be empty/);
    expect(() => buildUpstreamRequest(c, { id: ["a"] }, ctx, key)).toThrow(RequestArgumentsError);
  });
});

describe("path templates and dot segments", () => {
  const capture = config({ url: "https://api.example/v1/charges/{id}/capture" });

  it('a path value ".." is refused before anything is built: it would turn /v1/charges/{id}/capture into /v1/capture', () => {
    expect(requestArgumentIssues(capture, { id: ".." })).toEqual([{ path: "id", message: expect.stringMatching(/must not be "\.\."/) }]);
    expect(() => buildUpstreamRequest(capture, { id: ".." }, ctx, key)).toThrow(RequestArgumentsError);
  });

  it('a path value "." is refused: it would turn /v1/charges/{id}/capture into /v1/charges/capture', () => {
    expect(requestArgumentIssues(capture, { id: "." }).map((i) => i.path)).toEqual(["id"]);
    expect(() => buildUpstreamRequest(capture, { id: "." }, ctx, key)).toThrow(RequestArgumentsError);
  });

  it('two templates in one segment ({a}{b} with "." and ".") that make a ".." segment are refused', () => {
    const c = config({ url: "https://api.example/v1/charges/{a}{b}/capture" });
    expect(requestArgumentIssues(c, { a: ".", b: "." }).map((i) => i.path)).toEqual(["a", "b"]);
    // a segment that only comes out as ".." once filled in
    expect(requestArgumentIssues(config({ url: "https://api.example/v1/charges/.{a}/capture" }), { a: "." }).map((i) => i.path)).toEqual(["a"]);
    expect(() => buildUpstreamRequest(c, { a: ".", b: "." }, ctx, key)).toThrow(RequestArgumentsError);
    // dots inside a longer segment stay one segment
    expect(new URL(buildUpstreamRequest(c, { a: "..v", b: ".2" }, ctx, key).url).pathname).toBe("/v1/charges/..v.2/capture");
    expect(new URL(buildUpstreamRequest(capture, { id: "ch_..1" }, ctx, key).url).pathname).toBe("/v1/charges/ch_..1/capture");
  });
});

describe("formBody", () => {
  it("is URLSearchParams with bracket paths, and sends an empty object or list as an empty value (how Stripe clears it)", () => {
    expect(formBody({ metadata: { order_id: "6735" }, expand: ["customer", "invoice"], empty: {}, none: [] }).toString()).toBe(
      "metadata%5Border_id%5D=6735&expand%5B0%5D=customer&expand%5B1%5D=invoice&empty=&none=",
    );
  });

  it("a name with [ or ] (or empty), which would read as other nesting, is refused before anything is built", () => {
    const form = config({ body: "form" });
    expect(requestArgumentIssues(form, { "metadata[a]": "x", metadata: { a: "y" } }).map((i) => i.path)).toEqual(["metadata[a]"]);
    expect(requestArgumentIssues(form, { metadata: { "a][b": "x", "": 1 } }).map((i) => i.path)).toEqual(["metadata.a][b", "metadata."]);
    expect(() => buildUpstreamRequest(form, { "a[0]": 1, a: [2] }, ctx, key)).toThrow(RequestArgumentsError);
    // a JSON body may carry such names: they are only keys there
    expect(requestArgumentIssues(config({}), { "metadata[a]": "x" })).toEqual([]);
    // path and query arguments are not in the form body
    expect(requestArgumentIssues(config({ body: "form", query: ["x[y]".replace(/\W/g, "_")] }), { x_y_: "1" })).toEqual([]);
  });
});

describe("urlTemplateProblem", () => {
  it("allows templates in the path only, and every brace must be one", () => {
    expect(urlTemplateProblem("https://api.example/v1/{id}/x")).toBeNull();
    expect(urlTemplateProblem("https://{tenant}.example/v1")).toMatch(/path only, not in its host/);
    expect(urlTemplateProblem("https://api.example/v1?id={id}")).toMatch(/query/);
    expect(urlTemplateProblem("https://api.example/v1/{bad-name}")).toMatch(/brace/);
    // every template is checked, not only the first
    expect(urlTemplateProblem("https://api.example/v1/{id}?to={email}")).toMatch(/query/);
    expect(urlTemplateProblem("https://api.example/v1/{id}#{frag}")).toMatch(/query/);
  });
});
