import { describe, expect, it } from "vitest";
import { mcpServersFromEnv } from "./config";
import { gateOf, gateSettingOf, proxiedName } from "./proxied-tool";

describe("IDEMGATE_MCP_SERVERS", () => {
  const parse = (value: string) => mcpServersFromEnv({ IDEMGATE_MCP_SERVERS: value } as unknown as NodeJS.ProcessEnv);

  it("reads HTTP and stdio servers; nothing configured is none", () => {
    expect(mcpServersFromEnv({} as NodeJS.ProcessEnv)).toEqual([]);
    expect(
      parse('[{"name":"github","url":"https://mcp.example.com/mcp","headers":{"Authorization":"Bearer x"}},{"name":"files","command":"npx","args":["-y","fs-server"],"timeoutMs":5000}]'),
    ).toEqual([
      { name: "github", url: "https://mcp.example.com/mcp", headers: { Authorization: "Bearer x" } },
      { name: "files", command: "npx", args: ["-y", "fs-server"], timeoutMs: 5000 },
    ]);
  });

  it("names each problem", () => {
    expect(() => parse("{")).toThrow(/IDEMGATE_MCP_SERVERS is not JSON/);
    expect(() => parse('[{"name":"Git Hub","url":"https://x/mcp"}]')).toThrow(/0\.name: lower-case letters/);
    expect(() => parse('[{"name":"a","url":"ftp://x/mcp"}]')).toThrow(/IDEMGATE_MCP_SERVERS is invalid/);
    expect(() => parse('[{"name":"a","command":"x"},{"name":"a","command":"y"}]')).toThrow(/a is configured twice/);
    expect(() => parse('[{"name":"a","command":"x","url":"https://x"}]')).toThrow(/IDEMGATE_MCP_SERVERS is invalid/);
    // a server that fits neither shape is described by the shape it comes closest to, field by field
    expect(() => parse('[{"name":"a","url":"https://x/mcp","gate":"sometimes"}]')).toThrow(/is invalid: 0\.gate: Invalid option/);
    expect(() => parse('[{"name":"a","command":"x","tools":{"create_issue":{"gate":"yes"}}}]')).toThrow(/is invalid: 0\.tools\.create_issue\.gate: Invalid option/);
  });

  it("reads how a server's tools are gated, for the server and per tool", () => {
    expect(parse('[{"name":"a","command":"x","gate":"never","tools":{"create_issue":{"gate":"always"}}}]')).toEqual([
      { name: "a", command: "x", gate: "never", tools: { create_issue: { gate: "always" } } },
    ]);
  });
});

describe("proxied tools", () => {
  it("fit their names to Idemgate's: <server>.<tool>, lower case", () => {
    expect(proxiedName("github", "create_issue")).toBe("github.create_issue");
    expect(proxiedName("github", "createIssue")).toBe("github.create_issue");
    expect(proxiedName("files", "read-file")).toBe("files.read_file");
    expect(proxiedName("files", "2fa")).toBe("files.t_2fa");
  });

  it("are gated from their annotations", () => {
    expect(gateOf({ readOnlyHint: true })).toBe("read");
    expect(gateOf({ readOnlyHint: true, idempotentHint: false })).toBe("read");
    expect(gateOf({ idempotentHint: true })).toBe("idempotent");
    expect(gateOf({ destructiveHint: false })).toBe("write");
    expect(gateOf(undefined)).toBe("write");
  });

  it("are gated by the server's or the tool's gate setting when there is one", () => {
    const idempotent = { idempotentHint: true };
    expect(gateOf(idempotent, "always")).toBe("write");
    expect(gateOf({ readOnlyHint: true }, "always")).toBe("write");
    expect(gateOf(undefined, "never")).toBe("idempotent");
    expect(gateOf({ readOnlyHint: true }, "never")).toBe("read");
    expect(gateOf(idempotent, "by-annotations")).toBe("idempotent");
    const server = { name: "a", timeoutMs: 1_000, gate: "always" as const, tools: { create_issue: { gate: "never" as const } } };
    expect(gateSettingOf(server, "create_issue")).toBe("never");
    expect(gateSettingOf(server, "delete_issue")).toBe("always");
    expect(gateSettingOf({ name: "a", timeoutMs: 1_000 }, "x")).toBe("by-annotations");
    // a tool named like an Object.prototype member is not taken for a declaration
    expect(gateSettingOf({ ...server, gate: undefined }, "constructor")).toBe("by-annotations");
  });
});
