import { describe, expect, it } from "vitest";
import { mcpServersFromEnv } from "./config";
import { gateOf, proxiedName } from "./proxied-tool";

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
});
