import { readFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import type { CallEvent } from "@/lib/idempotency/engine";
import { KEY_STATES } from "@/lib/idempotency/record";
import { metrics } from "./metrics";

// The Prometheus alert rules that docs/operate.md offers to copy: valid YAML in the rule-file shape,
// and every metric and label value they name is one this server exports (a renamed metric would
// leave an alert that never fires). promtool accepted the same block (`promtool check rules`).

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels: { severity: string };
  annotations: { summary: string; description?: string };
}

const CALL_RESULTS = [
  "executed", "replayed", "read", "conflict", "stuck", "unknown", "mismatch", "fresh_key", "missing_key",
  "unavailable", "tool_failed", "outcome_unknown", "abandoned", "final_error",
] satisfies CallEvent["result"][];

async function alertRules(): Promise<Rule[]> {
  const markdown = await readFile(path.join(process.cwd(), "docs", "operate.md"), "utf8");
  const blocks = [...markdown.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]).filter((b) => b.startsWith("groups:"));
  expect(blocks).toHaveLength(1);
  const doc = parse(blocks[0]) as { groups: { name: string; rules: Rule[] }[] };
  expect(doc.groups.map((g) => g.name)).toEqual(["idemgate"]);
  return doc.groups[0].rules;
}

describe("alert rules in docs/operate.md", () => {
  it("are alerting rules with a severity, a summary and a duration in Prometheus's syntax", async () => {
    const rules = await alertRules();
    expect(rules.map((r) => r.alert)).toEqual(expect.arrayContaining(["IdemgateUnknownOutcomes", "IdemgateStuckKeys", "IdemgateOpenAnomalies", "IdemgateFailingClosed", "IdemgateStoreDown"]));
    for (const rule of rules) {
      expect(rule.alert).toMatch(/^Idemgate[A-Za-z]+$/);
      expect(rule.expr.length).toBeGreaterThan(0);
      expect(["page", "warn"]).toContain(rule.labels.severity);
      expect(rule.annotations.summary.length).toBeGreaterThan(0);
      if (rule.for !== undefined) expect(rule.for).toMatch(/^\d+[smh]$/);
    }
  });

  it("name only metrics and label values the server exports", async () => {
    // prom-client types `type` as a numeric enum; at run time it is the name ("histogram")
    const exported = new Set((await metrics().registry.getMetricsAsJSON()).flatMap((m) => (String(m.type) === "histogram" ? [`${m.name}_bucket`, `${m.name}_sum`, `${m.name}_count`] : [m.name])));
    const named: string[] = [];
    for (const rule of await alertRules()) {
      for (const [name] of rule.expr.matchAll(/\bidemgate_[a-z_]+/g)) {
        named.push(name);
        expect(exported, `${rule.alert}: ${name}`).toContain(name);
      }
      for (const [, values] of rule.expr.matchAll(/result=~?"([^"]+)"/g)) for (const v of values.split("|")) expect(CALL_RESULTS, rule.alert).toContain(v);
      for (const [, value] of rule.expr.matchAll(/state="([^"]+)"/g)) expect(KEY_STATES, rule.alert).toContain(value);
    }
    expect(new Set(named)).toEqual(new Set(["idemgate_keys", "idemgate_calls_total", "idemgate_anomalies_open", "idemgate_up", "idemgate_store_seconds_bucket", "idemgate_audit_seconds_bucket"]));
  });
});
