import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createApiToken } from "@/lib/auth/api-tokens";
import type { OperatorIdentity } from "@/lib/auth/roles";
import type { Runtime } from "@/lib/server/runtime";
import { SqlKeyStore } from "@/lib/store/sql/sql-key-store";
import { ToolRegistry } from "@/lib/tools/registry";
import { createTestPostgres, type TestPostgres } from "@/test/support/databases";
import { installTestRuntime } from "@/test/support/runtime";
import { ANOMALY_EXPORT_COLUMNS, exportAnomalies } from "./export-anomalies";

// Export of the anomaly list as JSON lines or CSV: every anomaly the list's filters match, read
// page by page through the list's cursor; only signed-in operators (the list's readers) export.

/** who the console session says is signed in (the cookie itself is lib/auth/console-sessions' concern) */
let signedIn: OperatorIdentity | null = null;
vi.mock("@/lib/auth/session", () => ({ currentOperator: async () => signedIn }));
const exportRoute = await import("@/app/api/v1/anomalies/export/route");

describe("export anomalies", () => {
  let pg: TestPostgres;
  let runtime: Runtime;
  let tenantToken: string;
  const base = Date.now() - 3_600_000;

  const seed = async (i: number, fields: { type: string; status: string; tool: string; key: string; summary: string }) => {
    const id = randomUUID();
    const at = new Date(base + i * 1000);
    await pg.db.prisma.anomaly.create({ data: { id, dedupeKey: `${fields.type}:${id}`, scope: "tenant-a", evidence: {}, detectedAt: at, updatedAt: at, ...fields } });
  };
  const get = async (query: string, headers: Record<string, string> = {}) => {
    const res = await exportRoute.GET(new Request(`http://idemgate.test/api/v1/anomalies/export?${query}`, { headers }), { params: Promise.resolve({}) });
    return { status: res.status, type: res.headers.get("content-type"), disposition: res.headers.get("content-disposition"), text: await res.text() };
  };

  beforeAll(async () => {
    pg = await createTestPostgres("export_anomalies");
    runtime = installTestRuntime({ db: pg.db, store: new SqlKeyStore(pg.db), registry: new ToolRegistry([]) });
    tenantToken = (await createApiToken(pg.db.prisma, { scope: "tenant-a", actor: "test" })).token;
    for (let i = 0; i < 7; i++) await seed(i, { type: "orphan_unknown_outcome", status: "open", tool: "mail.send", key: `mail-${i}`, summary: `call ${i} may have sent` });
    await seed(7, { type: "stale_suppression", status: "open", tool: "psp.refund", key: 'refund,"quoted"', summary: 'replayed "late",\nto another session' });
    await seed(8, { type: "orphan_unknown_outcome", status: "resolved", tool: "mail.send", key: "mail-resolved", summary: "decided" });
  }, 120_000);

  afterAll(async () => {
    await runtime?.close();
    await pg?.drop();
  });

  it("reads every matching anomaly through the cursor, one page at a time, newest first", async () => {
    const pages: number[] = [];
    const query = vi.spyOn(pg.db.prisma, "$queryRaw");
    const lines: string[] = [];
    for await (const chunk of exportAnomalies(pg.db.prisma, { status: "open", tool: "mail.send" }, "jsonl", 3)) {
      pages.push(chunk.split("\n").filter(Boolean).length);
      lines.push(...chunk.split("\n").filter(Boolean));
    }
    expect(query).toHaveBeenCalledTimes(3);
    query.mockRestore();
    expect(pages).toEqual([3, 3, 1]);
    const rows = lines.map((l) => JSON.parse(l));
    expect(rows.map((r) => r.key)).toEqual([6, 5, 4, 3, 2, 1, 0].map((i) => `mail-${i}`));
    expect(Object.keys(rows[0])).toEqual([...ANOMALY_EXPORT_COLUMNS]);
    expect(rows[0]).toMatchObject({ type: "orphan_unknown_outcome", status: "open", tool: "mail.send", scope: "tenant-a", summary: "call 6 may have sent" });
  });

  it("answers CSV with quoted fields and the filters applied, to a viewer as to an operator", async () => {
    signedIn = { id: "v", email: "viewer@example.com", role: "viewer" };
    const csv = await get("format=csv&status=open");
    expect(csv.status).toBe(200);
    expect(csv.type).toBe("text/csv; charset=utf-8");
    expect(csv.disposition).toContain('filename="idemgate-anomalies.csv"');
    const [header, ...rows] = csv.text.trimEnd().split("\r\n");
    expect(header).toBe("id,type,status,tool,scope,key,detectedAt,updatedAt,summary");
    // records end with CRLF; the summary's own line break (LF) stays inside its quoted field
    expect(rows).toHaveLength(8);
    expect(csv.text).not.toContain("mail-resolved");
    expect(rows[0]).toMatch(/^[0-9a-f-]{36},stale_suppression,open,psp\.refund,tenant-a,"refund,""quoted""",\d{4}-\d\d-\d\dT[^,]+Z,[^,]+Z,"replayed ""late"",\nto another session"$/);

    signedIn = { id: "o", email: "ops@example.com", role: "operator" };
    const jsonl = await get("format=jsonl&status=resolved&type=orphan_unknown_outcome");
    expect(jsonl.type).toBe("application/jsonl; charset=utf-8");
    expect(jsonl.text.trimEnd().split("\n").map((l) => JSON.parse(l).key)).toEqual(["mail-resolved"]);
    const all = await get("format=jsonl");
    expect(all.text.trimEnd().split("\n")).toHaveLength(9);
  });

  it("refuses a bad format or status, a tenant's token and no session with a problem", async () => {
    signedIn = { id: "o", email: "ops@example.com", role: "operator" };
    for (const [query, status, said] of [
      ["format=xlsx", 400, /format=xlsx is not an export format/],
      ["status=sideways", 400, /status/],
    ] as const) {
      const res = await get(query);
      expect(res.status, query).toBe(status);
      expect(res.type).toContain("application/problem+json");
      expect(JSON.parse(res.text).detail).toMatch(said);
    }
    const token = await get("format=csv", { authorization: `Bearer ${tenantToken}` });
    expect(token.status).toBe(403);
    expect(token.type).toContain("application/problem+json");
    expect(token.text).not.toContain("mail-");
    signedIn = null;
    const none = await get("format=csv");
    expect(none.status).toBe(401);
    expect(none.text).not.toContain("mail-");
  });
});
