import { describe, expect, it } from "vitest";
import { parseToolConfig } from "./config-file";
import { effectiveDeclaration, MASK } from "./declaration";
import { ToolRegistry } from "./registry";
import { upstreamToolsFromEnv } from "./upstream-from-env";

const FILE = `
tools:
  - name: billing.create_invoice
    description: Create an invoice
    leaseMs: 30000
    arguments: redacted
    redact: [/card]
    inputSchema: { type: object, properties: { card: { type: string } } }
    upstream:
      url: "https://svc:\${PASSWORD}@billing.internal/\${TENANT}/invoices?api_key=\${API_KEY}"
      timeoutMs: 5000
      statusUrl: "https://billing.internal/status?token=\${API_KEY}"
      headers: { authorization: "Bearer \${TOKEN}", x-team: payments }
`;

describe("a tool's effective declaration", () => {
  it("masks every header value and every value from the environment, and drops URL user info and query", () => {
    const env = { PASSWORD: "pw-secret-1", TENANT: "tenant-secret-2", API_KEY: "key-secret-3", TOKEN: "tok-secret-4" };
    const registry = new ToolRegistry(parseToolConfig(FILE, "idemgate.config.yaml", env).tools);
    const tool = registry.get("billing.create_invoice");
    const d = effectiveDeclaration(tool, registry.describe(tool), null);
    expect(d).toMatchObject({
      declaredIn: "idemgate.config.yaml, tools[0]",
      runs: "upstream",
      leaseMs: 30_000,
      upstream: {
        method: "POST",
        url: "https://billing.internal/${TENANT}/invoices",
        statusUrl: "https://billing.internal/status",
        timeoutMs: 5000,
        headers: [
          { name: "authorization", value: MASK },
          { name: "x-team", value: MASK },
        ],
      },
      arguments: { keep: "redacted", redact: ["/card"] },
      inputSchema: { type: "object", properties: { card: { type: "string" } } },
    });
    const shown = JSON.stringify(d);
    for (const secret of Object.values(env)) expect(shown).not.toContain(secret);
    expect(shown).not.toContain("payments");
  });

  it("an IDEMGATE_UPSTREAM_TOOLS tool: where it was declared, URL redacted", () => {
    const [tool] = upstreamToolsFromEnv(JSON.stringify([{ name: "crm.note", url: "http://u:p@127.0.0.1:9/n?sig=abc", headers: { "x-api-key": "k" } }]));
    const registry = new ToolRegistry([tool]);
    const d = effectiveDeclaration(tool, registry.describe(tool), null);
    expect(d).toMatchObject({ declaredIn: "IDEMGATE_UPSTREAM_TOOLS, [0]", upstream: { url: "http://127.0.0.1:9/n", headers: [{ name: "x-api-key", value: MASK }] } });
  });

  it("a preset tool: method, path template, body, key header and length, outcomes and probe, secrets masked", () => {
    const text = `
tools:
  - name: shop.refund
    description: Refund
    inputSchema: { type: object, required: [orderId], properties: { orderId: { type: string } } }
    upstream:
      preset: adyen
      method: POST
      url: "https://\${HOST}/v71/orders/{orderId}/refunds?key=\${API_KEY}"
      query: [dryRun]
      keyMaxLength: 40
      timeoutMs: 5000
      headers: { x-api-key: "\${API_KEY}" }
`;
    const env = { HOST: "pal-secret-host.adyen.example", API_KEY: "key-secret-9" };
    const registry = new ToolRegistry(parseToolConfig(text, "c.yaml", env).tools);
    const tool = registry.get("shop.refund");
    const d = effectiveDeclaration(tool, registry.describe(tool), null);
    expect(d.dedupes).toBe(true);
    expect(d.upstream).toEqual({
      method: "POST",
      url: "https://${HOST}/v71/orders/{orderId}/refunds",
      statusUrl: null,
      timeoutMs: 5000,
      headers: [{ name: "x-api-key", value: MASK }],
      preset: "adyen",
      query: ["dryRun"],
      body: "json",
      repeatInBody: [],
      keyHeader: "Idempotency-Key",
      keyMaxLength: 40,
      outcomes: [{ status: "422", outcome: "unknown", when: { errorCode: "704" } }],
      probe: "resend",
      keyRetentionMs: 31 * 24 * 60 * 60 * 1000,
    });
    const shown = JSON.stringify(d);
    for (const secret of Object.values(env)) expect(shown).not.toContain(secret);
  });
});
