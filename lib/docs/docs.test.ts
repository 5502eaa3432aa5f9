import { describe, expect, it } from "vitest";
import { PROBLEM_CODES } from "@/lib/http/problem";
import { getRegistry } from "@/lib/tools";
import { argumentRows, exampleFromSchema } from "./json-schema";
import { curlExample, toolOperations } from "./openapi-reference";
import { allProblemDocs, problemDoc } from "./problem-docs";

describe("examples generated from the tools' JSON Schemas", () => {
  const registry = getRegistry();
  it.each(registry.list().map((t) => [t.name, t] as const))("are valid arguments of %s", (_name, tool) => {
    const example = exampleFromSchema(registry.describe(tool).argumentsSchema);
    expect(() => registry.parseArgs(tool, example)).not.toThrow();
  });

  it("reads like data", () => {
    const charge = registry.describe(registry.get("payments.charge")).argumentsSchema;
    expect(exampleFromSchema(charge)).toEqual({ customerId: "cust_1001", amountCents: 1250, currency: "USD" });
  });

  it("lists arguments with nested objects flattened and constraints spelled out", () => {
    const rows = argumentRows(registry.describe(registry.get("payments.charge")).argumentsSchema);
    expect(rows.map((r) => r.name)).toContain("simulate.outcome");
    expect(rows.find((r) => r.name === "amountCents")).toMatchObject({ type: "integer", required: true, constraints: ["> 0", "≤ 1,000,000,000"] });
    expect(rows.find((r) => r.name === "simulate.outcome")).toMatchObject({ type: "enum", required: false, depth: 1 });
  });
});

describe("the API reference", () => {
  const doc = getRegistry().openApiDocument("http://idemgate.test");
  const ops = toolOperations(doc);

  it("has one operation per tool, with its key requirement", () => {
    // one each: invoke, or for a tool run by its caller, its reservations
    expect(ops.map((o) => o.tool).sort()).toEqual(getRegistry().list().map((t) => t.name).sort());
    for (const op of ops) {
      const tool = getRegistry().describe(getRegistry().get(op.tool));
      expect(op.idempotencyKey).toBe(tool.idempotencyKey);
      expect(op.headers.find((h) => h.name === "Idempotency-Key")?.required).toBe(
        tool.idempotencyKey === "unused" ? "unused" : tool.idempotencyKey === "required",
      );
      expect(op.responses.map((r) => r.status)).toContain("200");
    }
  });

  it("mints the key once in the curl example, so re-running it is a retry", () => {
    const charge = ops.find((o) => o.tool === "payments.charge")!;
    const curl = curlExample("http://idemgate.test", charge);
    expect(curl).toMatch(/^KEY=\$\(uuidgen\)/);
    expect(curl).toContain(`-H "Idempotency-Key: $KEY"`);
    expect(curl).toContain("$IDEMGATE_TOKEN");
    const read = ops.find((o) => o.kind === "read")!;
    expect(curlExample("http://idemgate.test", read)).not.toContain("Idempotency-Key");
  });
});

describe("problem type documentation", () => {
  it("explains every problem code the gateway can answer", () => {
    for (const code of PROBLEM_CODES) {
      const d = problemDoc(code)!;
      expect(d.happened).not.toMatch(/^The gateway answered/); // the generic fallback text
      expect(d.todo.length).toBeGreaterThan(10);
    }
    expect(allProblemDocs()).toHaveLength(PROBLEM_CODES.length);
    expect(problemDoc("no_such_code")).toBeNull();
  });
});
