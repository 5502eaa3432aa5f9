import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { isIdemgateError } from "@/lib/idempotency/errors";
import { composeTools, ConfigFileError, declaredInOf, loadToolConfig, parseToolConfig, type ConfigProblem } from "./config-file";
import { ToolRegistry } from "./registry";
import { upstreamToolsFromEnv } from "./upstream-from-env";

const GOOD = `
tools:
  - name: billing.create_invoice
    kind: write
    description: Create an invoice
    inputSchema:
      type: object
      required: [customerId, amountCents]
      additionalProperties: false
      properties:
        customerId: { type: string, minLength: 1 }
        amountCents: { type: integer, minimum: 1 }
    leaseMs: 30000
    ttlMs: 86400000
    stuckPolicy: block
    fallbackDedupe: { ttlMs: 5000 }
    arguments: redacted
    redact: [/customerId]
    upstream:
      url: "http://127.0.0.1:9/invoices"
      timeoutMs: 10000
      headers: { authorization: "Bearer \${BILLING_TOKEN}" }
mcpServers:
  - { name: memory, command: node, args: [server.js] }
`;

/** The problems a broken file is refused with. */
function problemsOf(text: string, env: Record<string, string | undefined> = { BILLING_TOKEN: "s3cret" }, file = "idemgate.config.yaml"): ConfigProblem[] {
  try {
    parseToolConfig(text, file, env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigFileError);
    expect((err as Error).message.startsWith(`${file}: `)).toBe(true);
    return (err as ConfigFileError).problems;
  }
  throw new Error("the file was accepted");
}

describe("a configuration file", () => {
  it("declares an upstream tool with its policy, schema and secrets from the environment", () => {
    const config = parseToolConfig(GOOD, "idemgate.config.yaml", { BILLING_TOKEN: "s3cret" });
    expect(config.tools).toHaveLength(1);
    const [tool] = config.tools;
    expect(tool).toMatchObject({
      name: "billing.create_invoice",
      kind: "write",
      leaseMs: 30_000,
      ttlMs: 86_400_000,
      stuckPolicy: "block",
      fallbackTtlMs: 5_000,
      upstream: { url: "http://127.0.0.1:9/invoices", timeoutMs: 10_000, headers: { authorization: "Bearer s3cret" } },
      argumentRetention: { keep: "redacted", redact: ["/customerId"] },
    });
    expect(declaredInOf(tool)).toEqual({
      source: "idemgate.config.yaml",
      path: "tools[0]",
      fromEnvironment: { "upstream.headers.authorization": "Bearer ${BILLING_TOKEN}" },
    });
    expect(config.mcpServers).toEqual([{ name: "memory", command: "node", args: ["server.js"] }]);
  });

  it("validates arguments by the inputSchema, each problem named by its path, and advertises the schema as written", () => {
    const registry = new ToolRegistry(parseToolConfig(GOOD, "f.yaml", { BILLING_TOKEN: "x" }).tools);
    const tool = registry.get("billing.create_invoice");
    expect(registry.parseArgs(tool, { customerId: "cus_1", amountCents: 5 })).toEqual({ customerId: "cus_1", amountCents: 5 });
    let thrown: unknown;
    try {
      registry.parseArgs(tool, { amountCents: 0, extra: true });
    } catch (err) {
      thrown = err;
    }
    expect(isIdemgateError(thrown, "invalid_arguments")).toBe(true);
    expect((thrown as { issues: unknown }).issues).toEqual(
      expect.arrayContaining([
        { path: "customerId", message: "is required" },
        { path: "amountCents", message: "must be >= 1" },
        { path: "extra", message: "is not an argument of billing.create_invoice" },
      ]),
    );
    const described = registry.describe(tool);
    expect(described.argumentsSchema).toEqual(expect.objectContaining({ required: ["customerId", "amountCents"], additionalProperties: false }));
    const doc = registry.openApiDocument();
    const op = doc.paths["/api/v1/tools/billing.create_invoice/invoke"].post as { requestBody: { content: { "application/json": { schema: unknown } } } };
    expect(op.requestBody.content["application/json"].schema).toEqual(described.argumentsSchema);
  });

  it("declares a tool that runs in the caller's process (runs: client), listed with its schema", () => {
    const config = parseToolConfig(
      "tools:\n  - name: payments.charge_card\n    runs: client\n    description: Charge a card\n    leaseMs: 30000\n    inputSchema: { type: object, required: [orderId], properties: { orderId: { type: string } } }\n",
      "f.yaml",
      {},
    );
    const registry = new ToolRegistry(config.tools);
    const tool = registry.get("payments.charge_card");
    expect(tool).toMatchObject({ runs: "client", kind: "write", leaseMs: 30_000 });
    expect(registry.describe(tool)).toMatchObject({ source: "client", argumentsSchema: { required: ["orderId"] } });
    expect(() => registry.parseArgs(tool, {})).toThrow("orderId: is required");
    expect(problemsOf("tools:\n  - name: a.b\n    kind: read\n    runs: client\n    description: x\n")).toEqual([{ path: "tools[0].kind", message: "runs: client is for write tools (a read needs no guard)" }]);
  });

  it("examples/idemgate.config.yaml declares a client-run tool, an upstream tool and an MCP server", () => {
    const config = loadToolConfig(path.join(import.meta.dirname, "../../examples/idemgate.config.yaml"), { EXAMPLE_BILLING_TOKEN: "dev-token" });
    expect(config.tools.map((t) => [t.name, t.runs ?? (t.upstream ? "upstream" : "in_process")])).toEqual([
      ["payments.charge_card", "client"],
      ["billing.create_invoice", "upstream"],
    ]);
    expect(config.mcpServers.map((s) => s.name)).toEqual(["counter"]);
  });

  it("the example's commented preset tool, uncommented, is a valid declaration", () => {
    const text = readFileSync(path.join(import.meta.dirname, "../../examples/idemgate.config.yaml"), "utf8");
    const commented = text.split("\n").filter((l) => l.startsWith("  # ") && /^  # ( {2}|- )/.test(l)).map((l) => l.replace(/^  # /, "  "));
    const [tool] = parseToolConfig(`tools:\n${commented.join("\n")}\n`, "example.yaml", { STRIPE_SECRET_KEY: "sk_test" }).tools;
    expect(tool).toMatchObject({ name: "payments.create_payment_intent", dedupes: true, upstream: { preset: "stripe", body: "form", probe: "resend" } });
  });

  it("reads JSON files too", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "idemgate-config-"));
    const file = path.join(dir, "tools.json");
    writeFileSync(file, JSON.stringify({ tools: [{ name: "crm.note", description: "Add a note", upstream: { url: "http://127.0.0.1:9/notes", timeoutMs: 1000 } }] }));
    expect(loadToolConfig(file, {}).tools.map((t) => t.name)).toEqual(["crm.note"]);
    writeFileSync(file, '{"tools": [}');
    expect(() => loadToolConfig(file, {})).toThrow(/tools\.json: is not valid JSON/);
    expect(() => loadToolConfig(path.join(dir, "missing.yaml"), {})).toThrow(/missing\.yaml: no such file/);
  });
});

describe("a configuration file with an error is refused, naming the field's path", () => {
  it("YAML syntax: the line and column", () => {
    const problems = problemsOf("tools:\n  - name: a.b\n    description: [unclosed\n");
    expect(problems[0].path).toMatch(/^line \d+, column \d+$/);
    expect(problems[0].message).toMatch(/is not valid YAML/);
  });

  it("an unknown field", () => {
    expect(problemsOf(GOOD.replace("stuckPolicy: block", "stuckPolicy: block\n    retries: 3"))).toEqual([{ path: "tools[0].retries", message: "is not a field of this declaration" }]);
    expect(problemsOf(GOOD.replace("timeoutMs: 10000", "timeoutMs: 10000\n      verb: PUT"))).toEqual([{ path: "tools[0].upstream.verb", message: "is not a field of this declaration" }]);
    expect(problemsOf(`${GOOD}\nextras: true\n`)).toEqual([{ path: "extras", message: "is not a field of this declaration" }]);
  });

  it("a wrong type", () => {
    const problems = problemsOf(GOOD.replace("leaseMs: 30000", 'leaseMs: "30 s"'));
    expect(problems).toHaveLength(1);
    expect(problems[0].path).toBe("tools[0].leaseMs");
    expect(problemsOf(GOOD.replace("kind: write", "kind: mutate"))[0].path).toBe("tools[0].kind");
    expect(problemsOf(GOOD.replace('url: "http://127.0.0.1:9/invoices"', 'url: "ftp://x/y"'))[0]).toEqual({ path: "tools[0].upstream.url", message: "must be an http or https URL" });
    expect(problemsOf(GOOD.replace("args: [server.js]", "args: server.js"))[0].path).toMatch(/^mcpServers\[0\]/);
  });

  it("an MCP server's gate, for the server and per tool: a wrong one is named by its path", () => {
    const gated = GOOD.replace("args: [server.js] }", "args: [server.js], gate: always, tools: { set_flag: { gate: by-annotations } } }");
    expect(parseToolConfig(gated, "idemgate.config.yaml", { BILLING_TOKEN: "s3cret" }).mcpServers[0]).toMatchObject({ gate: "always", tools: { set_flag: { gate: "by-annotations" } } });
    expect(problemsOf(gated.replace("gate: always", "gate: sometimes"))).toEqual([{ path: "mcpServers[0].gate", message: expect.stringContaining('"always"|"by-annotations"|"never"') }]);
    expect(problemsOf(gated.replace("gate: by-annotations", "gate: nope"))).toEqual([{ path: "mcpServers[0].tools.set_flag.gate", message: expect.stringContaining("by-annotations") }]);
    expect(problemsOf(gated.replace("{ gate: by-annotations }", "{ gat: never }"))).toContainEqual({ path: "mcpServers[0].tools.set_flag.gat", message: "is not a field of this declaration" });
  });

  it("a missing environment variable: its name and the field's path", () => {
    expect(problemsOf(GOOD, {})).toEqual([{ path: "tools[0].upstream.headers.authorization", message: "the environment variable BILLING_TOKEN is not set" }]);
    expect(problemsOf(GOOD, { BILLING_TOKEN: "" })[0].message).toBe("the environment variable BILLING_TOKEN is not set (it is empty)");
    // $${ is a literal ${
    const literal = parseToolConfig(GOOD.replace("Bearer ${BILLING_TOKEN}", () => "Bearer $${BILLING_TOKEN}"), "f.yaml", {});
    expect(literal.tools[0].upstream?.headers).toEqual({ authorization: "Bearer ${BILLING_TOKEN}" });
  });

  it("a name declared twice: in the file, beside IDEMGATE_UPSTREAM_TOOLS and the built-in tools, and an MCP server beside IDEMGATE_MCP_SERVERS", () => {
    const twice = GOOD.replace("mcpServers:", `  - name: billing.create_invoice\n    description: again\n    upstream: { url: "http://127.0.0.1:9/x", timeoutMs: 1000 }\nmcpServers:`);
    expect(problemsOf(twice)).toEqual([{ path: "tools[1].name", message: "billing.create_invoice is declared twice (also tools[0])" }]);
    expect(problemsOf(`${GOOD}  - { name: memory, url: "http://127.0.0.1:9/mcp" }\n`)).toEqual([{ path: "mcpServers[1].name", message: "memory is declared twice (also mcpServers[0])" }]);

    const config = parseToolConfig(GOOD, "idemgate.config.yaml", { BILLING_TOKEN: "x" });
    const fromEnv = upstreamToolsFromEnv(JSON.stringify([{ name: "crm.note", url: "http://127.0.0.1:9/a" }, { name: "billing.create_invoice", url: "http://127.0.0.1:9/b" }]));
    expect(() => composeTools(fromEnv, config)).toThrow("idemgate.config.yaml: tools[0].name: billing.create_invoice is also declared in IDEMGATE_UPSTREAM_TOOLS ([1])");
    const builtIn = new ToolRegistry(fromEnv.slice(0, 1)).list().concat(config.tools.map((t) => ({ ...t, declaredIn: undefined }) as never));
    expect(() => composeTools(builtIn, config)).toThrow(/tools\[0\]\.name: billing\.create_invoice is also declared as a built-in tool/);
    expect(() => composeTools([], config, [{ name: "memory", url: "http://127.0.0.1:9/mcp" }])).toThrow("mcpServers[0].name: memory is also declared in IDEMGATE_MCP_SERVERS ([0])");
    expect(composeTools(fromEnv.slice(0, 1), config).map((t) => t.name)).toEqual(["crm.note", "billing.create_invoice"]);
  });

  it("an upstream timeout not below the lease", () => {
    expect(problemsOf(GOOD.replace("timeoutMs: 10000", "timeoutMs: 30000"))).toEqual([
      { path: "tools[0].upstream.timeoutMs", message: expect.stringMatching(/^must be below the lease \(30000 ms\) by more than \d+ ms/) },
    ]);
    // the default lease (60 s) when none is given
    expect(problemsOf(GOOD.replace("leaseMs: 30000", "").replace("timeoutMs: 10000", "timeoutMs: 60000"))[0]).toEqual({
      path: "tools[0].upstream.timeoutMs",
      message: expect.stringContaining("(60000 ms, the default)"),
    });
  });

  it("a bad inputSchema: the path inside the schema", () => {
    expect(problemsOf(GOOD.replace("minimum: 1", "minimun: 1"))).toEqual([{ path: "tools[0].inputSchema.properties.amountCents.minimun", message: "is not a JSON Schema keyword" }]);
    expect(problemsOf(GOOD.replace("type: integer", "type: integr"))).toEqual([
      { path: "tools[0].inputSchema.properties.amountCents.type", message: "must be equal to one of the allowed values" },
    ]);
    expect(problemsOf(GOOD.replace("customerId: { type: string, minLength: 1 }", "customerId: { type: string, format: emial }"))).toEqual([
      { path: "tools[0].inputSchema.properties.customerId", message: 'unknown format "emial"' },
    ]);
    expect(problemsOf(GOOD.replace("      type: object\n      required", "      type: array\n      required"))).toEqual([
      { path: "tools[0].inputSchema.type", message: 'must be "object": a tool\'s arguments are a JSON object' },
    ]);
  });

  it("other cross-field mistakes", () => {
    const noSource = GOOD.replace(/    upstream:\n      url: .*\n      timeoutMs: 10000\n      headers: .*\n/, "");
    expect(problemsOf(noSource)).toEqual([{ path: "tools[0]", message: expect.stringMatching(/^give either `upstream`/) }]);
    expect(problemsOf(GOOD.replace("kind: write", "kind: read"))).toEqual([{ path: "tools[0].fallbackDedupe", message: "is for write tools (reads are never gated)" }]);
    expect(problemsOf(GOOD.replace("arguments: redacted", "arguments: full"))).toEqual([{ path: "tools[0].redact", message: "is for arguments: redacted (this tool keeps full)" }]);
    expect(problemsOf("tools:\n  - name: Bad Name\n    description: x\n    runs: client\n")[0].path).toBe("tools[0].name");
  });

  it("every problem at once, not only the first", () => {
    const problems = problemsOf(GOOD.replace("minimum: 1", "minimun: 1").replace("mcpServers:", "  - { name: crm.note, description: n, upstream: { url: \"http://127.0.0.1:9/n\", headers: { x: \"${NOPE}\" } } }\nmcpServers:"));
    expect(problems.map((p) => p.path)).toEqual(["tools[1].upstream.headers.x"]);
  });
});

describe("upstream request shapes in a configuration file", () => {
  const shaped = (upstream: string, inputSchema = "{ type: object, required: [orderId], properties: { orderId: { type: string } } }", extra = "") => `
tools:
  - name: shop.refund
    description: Refund an order
${extra}    inputSchema: ${inputSchema}
    upstream:
      url: "https://api.example/v1/orders/{orderId}/refunds"
      timeoutMs: 5000
${upstream.split("\n").map((l) => `      ${l}`).join("\n")}
`;

  it("a preset fills the provider's rules, and the declaration's own fields override them", () => {
    const [stripe] = parseToolConfig(shaped("preset: stripe"), "c.yaml", {}).tools;
    expect(stripe.dedupes).toBe(true);
    expect(stripe.upstream).toMatchObject({ preset: "stripe", body: "form", keyHeader: "Idempotency-Key", keyMaxLength: 255, probe: "resend", keyRetentionMs: 86_400_000, outcomes: { "409": "unknown" } });
    const [own] = parseToolConfig(shaped('preset: stripe\nmethod: POST\nbody: json\nkeyMaxLength: 40\noutcomes: { "409": not_run, "404": not_run }'), "c.yaml", {}).tools;
    expect(own.upstream).toMatchObject({ method: "POST", body: "json", keyMaxLength: 40, outcomes: { "409": "not_run", "404": "not_run" } });
    const [paypal] = parseToolConfig(shaped("preset: paypal"), "c.yaml", {}).tools;
    expect(paypal.upstream).toMatchObject({ keyHeader: "PayPal-Request-Id", probe: "resend" });
    // dedupes: false turns the preset's resend probe off with it
    const [notDeduped] = parseToolConfig(shaped("preset: stripe", undefined, "    dedupes: false\n"), "c.yaml", {}).tools;
    expect(notDeduped.dedupes).toBe(false);
    expect(notDeduped.upstream?.probe).toBeUndefined();
    const [off] = parseToolConfig(shaped("preset: adyen\nprobe: none"), "c.yaml", {}).tools;
    expect(off.upstream?.probe).toBeUndefined();
    expect(off.upstream?.keyMaxLength).toBe(64);
  });

  it("presets are for POST only, and the resend preset for the endpoints Resend deduplicates", () => {
    expect(problemsOf(shaped("preset: stripe\nmethod: DELETE"), {})).toEqual([{ path: "tools[0].upstream.method", message: expect.stringMatching(/^DELETE is not what the stripe preset is for/) }]);
    expect(problemsOf(shaped("preset: resend"), {})).toEqual([{ path: "tools[0].upstream.url", message: expect.stringMatching(/must be POST \/emails or \/emails\/batch/) }]);
    // an endpoint the declaration says deduplicates
    expect(parseToolConfig(shaped("preset: resend", undefined, "    dedupes: true\n"), "c.yaml", {}).tools[0].dedupes).toBe(true);
    const [tool] = upstreamToolsFromEnv(JSON.stringify([{ name: "mail.batch", url: "https://api.resend.com/emails/batch", preset: "resend" }]));
    expect(tool.dedupes).toBe(true);
  });

  it("the same fields in IDEMGATE_UPSTREAM_TOOLS", () => {
    const [tool] = upstreamToolsFromEnv(JSON.stringify([{ name: "mail.send", url: "https://api.example/emails", preset: "resend", query: ["dryRun"] }]));
    expect(tool.upstream).toMatchObject({ keyHeader: "Idempotency-Key", body: "json", probe: "resend", query: ["dryRun"] });
    expect(() => upstreamToolsFromEnv(JSON.stringify([{ name: "mail.send", url: "https://api.example/emails", outcomes: { "200": "not_run" } }]))).toThrow(
      /IDEMGATE_UPSTREAM_TOOLS: \[0\]\.outcomes\["200"\]: must be a 4xx or 5xx status/,
    );
    expect(() => upstreamToolsFromEnv(JSON.stringify([{ name: "mail.send", url: "https://api.example/emails", method: "GET" }]))).toThrow(/\[0\]\.method/);
  });

  it("argument retention in IDEMGATE_UPSTREAM_TOOLS and in a runs: client entry, as in the file's upstream tools", () => {
    const [kept] = upstreamToolsFromEnv(JSON.stringify([{ name: "mail.send", url: "https://api.example/emails", arguments: "redacted", redact: ["/to"] }]));
    expect(kept.argumentRetention).toEqual({ keep: "redacted", redact: ["/to"] });
    const [byDefault] = upstreamToolsFromEnv(JSON.stringify([{ name: "mail.send", url: "https://api.example/emails" }]));
    expect(byDefault.argumentRetention).toEqual({ keep: "redacted", redact: [] });
    expect(() => upstreamToolsFromEnv(JSON.stringify([{ name: "mail.send", url: "https://api.example/emails", redact: ["to"] }]))).toThrow(/\[0\]\.redact\[0\]: must be a JSON pointer/);
    const client = parseToolConfig("tools:\n  - { name: ledger.post, description: d, runs: client, arguments: none }\n", "c.yaml", {});
    expect(client.tools[0].argumentRetention).toEqual({ keep: "none", redact: [] });
  });

  it("bad declarations are refused, each naming its field", () => {
    const at = (upstream: string, inputSchema?: string, extra?: string) => problemsOf(shaped(upstream, inputSchema, extra), {});
    expect(at("method: GET")).toEqual([{ path: "tools[0].upstream.method", message: "must be POST, PUT, PATCH or DELETE" }]);
    expect(at("body: xml")).toEqual([{ path: "tools[0].upstream.body", message: "must be json, form or none" }]);
    expect(at("preset: square")[0].path).toBe("tools[0].upstream.preset");
    expect(at('outcomes: { "200": not_run }')).toEqual([{ path: 'tools[0].upstream.outcomes["200"]', message: expect.stringMatching(/^must be a 4xx or 5xx status/) }]);
    expect(at('outcomes: { "302": unknown }')[0].path).toBe('tools[0].upstream.outcomes["302"]');
    expect(at('outcomes: { "503": done }')).toEqual([{ path: 'tools[0].upstream.outcomes["503"]', message: "a 5xx cannot be done: a stored result is a 2xx or a final 4xx" }]);
    expect(at('outcomes: { "502": { outcome: not_run, when: { error: down } } }')).toEqual([{ path: 'tools[0].upstream.outcomes["502"]', message: expect.stringMatching(/^a 502 cannot be not_run/) }]);
    expect(at('outcomes: { "504": not_run }')[0].message).toMatch(/^a 504 cannot be not_run/);
    expect(at('outcomes: { "503": not_run }')).toEqual([{ path: 'tools[0].upstream.outcomes["503"]', message: expect.stringMatching(/^a 503 can be not_run only with a when: clause/) }]);
    expect(() => parseToolConfig(shaped('outcomes: { "503": { outcome: not_run, when: { "error.code": maintenance } } }'), "c.yaml", {})).not.toThrow();
    expect(at('outcomes: { "409": released }')[0].path).toBe('tools[0].upstream.outcomes["409"]');
    expect(at("keyMaxLength: 8")).toEqual([{ path: "tools[0].upstream.keyMaxLength", message: "must be at least 32" }]);
    expect(at("keyHeader: Idemgate-Key")).toEqual([{ path: "tools[0].upstream.keyHeader", message: "Idemgate-Key is a header Idemgate sets itself" }]);
    expect(at("query: [orderId]")).toEqual([{ path: "tools[0].upstream.query[0]", message: "orderId is already in the URL's path" }]);
    expect(problemsOf(shaped("query: [dryRun]").replace("/refunds", "/refunds?dryRun=1"), {})).toEqual([{ path: "tools[0].upstream.query[0]", message: expect.stringMatching(/already in the URL's query/) }]);
    const schema = "{ type: object, required: [orderId], properties: { orderId: { type: string }, reason: { type: string }, dryRun: { type: boolean } } }";
    expect(problemsOf(shaped("method: DELETE\nquery: [dryRun]", schema), {})).toEqual([{ path: "tools[0].upstream.body", message: expect.stringMatching(/reason .* would never be sent/) }]);
    expect(() => parseToolConfig(shaped("method: DELETE\nquery: [dryRun, reason]", schema), "c.yaml", {})).not.toThrow();
    expect(at("repeatInBody: [amount]")).toEqual([{ path: "tools[0].upstream.repeatInBody[0]", message: expect.stringMatching(/neither a path nor a query argument/) }]);
    // a templated argument the schema does not require: a call without it could not be sent
    expect(at("body: json", "{ type: object, properties: { orderId: { type: string } } }")).toEqual([
      { path: "tools[0].upstream.url", message: "names {orderId}, so inputSchema must list orderId in required (a call without it could not be sent)" },
    ]);
    // resend is safe only at a service that deduplicates, within the time it keeps keys
    expect(at("probe: resend")).toEqual([
      { path: "tools[0].upstream.probe", message: expect.stringMatching(/needs dedupes: true/) },
      { path: "tools[0].upstream.keyRetentionMs", message: expect.stringMatching(/is required with probe: resend/) },
    ]);
    expect(at("preset: stripe\nprobe: resend", undefined, "    dedupes: false\n")).toEqual([{ path: "tools[0].upstream.probe", message: expect.stringMatching(/needs dedupes: true .* set probe: none/) }]);
    expect(at('preset: stripe\nstatusUrl: "https://api.example/status"')).toEqual([{ path: "tools[0].upstream.preset", message: "probe: resend and statusUrl are two probes; give one" }]);
  });

  it("a tool whose path template is not in its path is refused", () => {
    const text = shaped("body: json").replace("https://api.example/v1/orders/{orderId}/refunds", "https://{orderId}.example/v1/refunds");
    expect(problemsOf(text, {})).toEqual([{ path: "tools[0].upstream.url", message: expect.stringMatching(/path only, not in its host|must be an http or https URL/) }]);
  });
});
