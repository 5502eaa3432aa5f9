import type { Tool } from "@modelcontextprotocol/client";
import { describe, expect, it } from "vitest";
import { proxiedTool, type McpCallTarget } from "./proxied-tool";

/**
 * A guarded MCP server's input schema is the server's: its `pattern`s are run against tenants'
 * arguments with a linear-time engine. With RegExp, `(a+)+$` on a long run of "a" ending in
 * another character backtracks exponentially and holds the gateway's thread for good.
 */
const target: McpCallTarget = {
  connected: () => true,
  callTool: async () => ({ content: [] }),
  acceptsTasks: () => false,
  taskRequest: async () => ({}),
};

function toolWith(inputSchema: Tool["inputSchema"]) {
  const tool = proxiedTool({ name: "hostile", timeoutMs: 5_000 }, { name: "plant", inputSchema }, target);
  if (!tool) throw new Error("the tool was not made");
  return tool;
}

describe("patterns of a guarded server's input schema", () => {
  it("runs a catastrophic pattern in linear time: a long non-matching argument is refused, a matching one taken", () => {
    const tool = toolWith({
      type: "object",
      properties: { label: { type: "string", pattern: "(a+)+$" }, tags: { type: "array", items: { type: "string", pattern: "^(x+x+)+y$" } } },
      required: ["label"],
    });
    // a long run of "a" that ends in another character: RegExp backtracks exponentially on it
    const hostile = "a".repeat(50_000) + "!";
    const refused = tool.schema.safeParse({ label: hostile, tags: ["xxy", "x".repeat(50_000)] });
    expect(refused.success).toBe(false);
    expect(refused.error!.issues.map((i) => [i.path.join("."), i.message])).toEqual([
      ["label", 'does not match the pattern "(a+)+$"'],
      ["tags.1", 'does not match the pattern "^(x+x+)+y$"'],
    ]);
    // matching ones are taken (a pattern is an unanchored search, as JSON Schema reads it)
    expect(tool.schema.safeParse({ label: hostile + "a", tags: ["xxy"] }).success).toBe(true);
    expect(tool.schema.safeParse({ label: "b-a" }).success).toBe(true);
  });

  it("leaves to the server what RE2 cannot run (backreferences) and patterns under combinators; a property named pattern is a property", () => {
    const tool = toolWith({
      type: "object",
      properties: {
        pair: { type: "string", pattern: "^(a)\\1$" },
        either: { anyOf: [{ type: "string", pattern: "^(b+)+$" }, { type: "number" }] },
        pattern: { type: "string", pattern: "^p" },
      },
    });
    expect(tool.schema.safeParse({ pair: "ab", either: "b".repeat(50_000) + "!", pattern: "p1" }).success).toBe(true);
    expect(tool.schema.safeParse({ pattern: "q" }).success).toBe(false);
    expect(tool.schema.safeParse({ pattern: 1 }).success).toBe(false);
  });
});
