import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { createApiToken } from "@/lib/auth/api-tokens";
import type { Runtime } from "@/lib/server/runtime";
import { SqlKeyStore } from "@/lib/store/sql/sql-key-store";
import { defineTool } from "@/lib/tools/define-tool";
import { ToolRegistry } from "@/lib/tools/registry";
import { createTestPostgres, type TestPostgres } from "@/test/support/databases";
import { installTestRuntime } from "@/test/support/runtime";
import { csvField } from "@/lib/http/export-download";
import { EXPORT_COLUMNS, exportKeys } from "./export-keys";

const exportRoute = await import("@/app/api/v1/keys/export/route");

// Export of the keys list as JSON lines or CSV: every key the filter matches, read page by page
// through the list's cursor (never the whole list at once); a tenant's token exports its own scope.

const send = defineTool({ name: "mail.send", kind: "write", description: "sends", schema: z.looseObject({}), run: async () => ({ status: 201, body: { ok: true } }) });
const refund = defineTool({ name: "psp.refund", kind: "write", description: "refunds", schema: z.looseObject({}), run: async () => ({ status: 402, body: { declined: true } }) });

describe("export keys", () => {
  let pg: TestPostgres;
  let runtime: Runtime;
  const tokens: Record<string, string> = {};

  async function call(scope: string, tool: string, key: string) {
    const t = runtime.registry.get(tool);
    return runtime.engine.invoke(t, runtime.registry.runnerFor(t, runtime.db.prisma), { scope, key, args: runtime.registry.parseArgs(t, {}) });
  }
  const get = async (query: string, scope: string) => {
    const res = await exportRoute.GET(new Request(`http://idemgate.test/api/v1/keys/export?${query}`, { headers: { authorization: `Bearer ${tokens[scope]}` } }), {
      params: Promise.resolve({}),
    });
    return { status: res.status, type: res.headers.get("content-type"), disposition: res.headers.get("content-disposition"), text: await res.text() };
  };

  beforeAll(async () => {
    pg = await createTestPostgres("export_keys");
    runtime = installTestRuntime({ db: pg.db, store: new SqlKeyStore(pg.db), registry: new ToolRegistry([send, refund]) });
    for (const scope of ["tenant-a", "tenant-b"]) tokens[scope] = (await createApiToken(pg.db.prisma, { scope, actor: "test" })).token;
    for (let i = 0; i < 7; i++) await call("tenant-a", "mail.send", `mail-${i}`);
    await call("tenant-a", "psp.refund", 'refund,"quoted"');
    await call("tenant-b", "mail.send", "mail-of-b");
    await runtime.audit.flush();
  }, 120_000);

  afterAll(async () => {
    await runtime?.close();
    await pg?.drop();
  });

  it("reads every matching key through the cursor, one page at a time", async () => {
    const list = vi.spyOn(runtime.store, "list");
    const lines: string[] = [];
    for await (const chunk of exportKeys(runtime, { tool: "mail.send" }, "jsonl", "operator", 3)) lines.push(...chunk.split("\n").filter(Boolean));
    expect(list.mock.calls.map(([q]) => q.limit)).toEqual([3, 3, 3]);
    list.mockRestore();
    const rows = lines.map((l) => JSON.parse(l));
    expect(rows.map((r) => `${r.scope}/${r.key}`).sort()).toEqual([...[0, 1, 2, 3, 4, 5, 6].map((i) => `tenant-a/mail-${i}`), "tenant-b/mail-of-b"].sort());
    expect(Object.keys(rows[0])).toEqual([...EXPORT_COLUMNS]);
    expect(rows[0]).toMatchObject({ tool: "mail.send", state: "done", resultStatus: 201 });
  });

  it("answers CSV with quoted fields and a tenant's own keys only", async () => {
    const csv = await get("format=csv", "tenant-a");
    expect(csv.status).toBe(200);
    expect(csv.type).toBe("text/csv; charset=utf-8");
    expect(csv.disposition).toContain("idemgate-keys.csv");
    const lines = csv.text.trimEnd().split("\r\n");
    expect(lines[0]).toBe(EXPORT_COLUMNS.join(","));
    expect(lines).toHaveLength(1 + 8);
    expect(csv.text).not.toContain("mail-of-b");
    expect(lines.find((l) => l.includes("refund"))).toContain(`tenant-a,"refund,""quoted""",psp.refund,done,402,`);
    const jsonl = await get("format=jsonl&tool=psp.refund", "tenant-a");
    expect(jsonl.type).toBe("application/jsonl; charset=utf-8");
    expect(jsonl.text.trimEnd().split("\n").map((l) => JSON.parse(l).key)).toEqual(['refund,"quoted"']);
    expect(csvField('a"b')).toBe('"a""b"');
  });

  it("writes a text a spreadsheet would take for a formula as text", () => {
    expect(csvField("=HYPERLINK(\"http://evil.example\",\"x\")")).toBe(`"'=HYPERLINK(""http://evil.example"",""x"")"`);
    for (const start of ["+", "-", "@", "\t", "\r"]) expect(csvField(`${start}1+1`).replace(/^"/, "")).toMatch(/^'/);
    expect(csvField("order-1")).toBe("order-1");
    expect(csvField(-3)).toBe("-3");
  });

  it("writes a formula after a character a spreadsheet may start a new cell at (; , tab, line break) as text, in one quoted field", () => {
    expect(csvField("a;=HYPERLINK(1)")).toBe(`"a;'=HYPERLINK(1)"`);
    for (const separator of [";", ",", "\t", "\n", "\r\n", "; ", ",  "]) {
      for (const start of ["=", "+", "-", "@"]) {
        const field = csvField(`order${separator}${start}1+1`);
        expect(field, JSON.stringify(separator + start)).toBe(`"order${separator}'${start}1+1"`);
      }
    }
    expect(csvField("=1;=2")).toBe(`"'=1;'=2"`);
    // a `;` or a tab alone is quoted (one cell whatever the separator), its text unchanged
    expect(csvField("a;b")).toBe(`"a;b"`);
    expect(csvField("a\tb")).toBe(`"a\tb"`);
    expect(csvField("a-b;c")).toBe(`"a-b;c"`);
    expect(csvField("2026-12-06")).toBe("2026-12-06");
  });

  it("refuses a bad format, state or another scope with a problem", async () => {
    for (const [query, status, said] of [
      ["format=xlsx", 400, /format=xlsx is not an export format/],
      ["state=sideways", 400, /state/],
      ["scope=tenant-b", 403, /own scope/],
    ] as const) {
      const res = await get(query, "tenant-a");
      expect(res.status, query).toBe(status);
      expect(res.type).toContain("application/problem+json");
      expect(JSON.parse(res.text).detail).toMatch(said);
    }
  });
});
