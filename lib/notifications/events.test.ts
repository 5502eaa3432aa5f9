import { describe, expect, it } from "vitest";
import { eventIdOf, eventsForOpenedAnomalies, renderEventBody } from "./events";

const anomaly = (over: Partial<Parameters<typeof eventsForOpenedAnomalies>[0][number]> = {}) => ({
  id: "a1",
  type: "orphan_unknown_outcome",
  dedupeKey: "unknown_outcome:e1",
  tool: "payments.charge",
  scope: "acme",
  key: "order-<1>",
  summary: "payments.charge ended without knowing whether its side effect happened (timed out & retried)",
  evidence: { cause: "reported", executionId: "e1" },
  detectedAt: new Date("2026-12-02T08:00:00Z"),
  ...over,
});

describe("webhook events", () => {
  it("an unknown outcome is key.unknown (reported) or key.stuck (silent) and anomaly.opened; other anomalies only the latter", () => {
    expect(eventsForOpenedAnomalies([anomaly()]).map((e) => e.type)).toEqual(["key.unknown", "anomaly.opened"]);
    expect(eventsForOpenedAnomalies([anomaly({ evidence: { cause: "silent", executionId: "e1" } })]).map((e) => e.type)).toEqual(["key.stuck", "anomaly.opened"]);
    expect(eventsForOpenedAnomalies([anomaly({ type: "stale_suppression", dedupeKey: "stale:s1" })]).map((e) => e.type)).toEqual(["anomaly.opened"]);
  });

  it("gives the same finding the same id in every process, and each event type its own", () => {
    const [unknown, opened] = eventsForOpenedAnomalies([anomaly()]);
    expect(unknown.id).toBe(eventIdOf("key.unknown", "unknown_outcome:e1"));
    expect(eventsForOpenedAnomalies([anomaly({ id: "found-by-another-process" })])[0].id).toBe(unknown.id);
    expect(opened.id).not.toBe(unknown.id);
    expect(unknown.id).toMatch(/^evt_[0-9a-f]{32}$/);
    expect(unknown.data).toMatchObject({ keyPath: "/keys/acme/order-%3C1%3E", anomaly: { path: "/anomalies/a1" }, executionId: "e1" });
  });

  it("renders Idemgate's JSON, or a Slack message with its markup characters escaped", () => {
    const [event] = eventsForOpenedAnomalies([anomaly()]);
    expect(JSON.parse(renderEventBody(event, "idemgate"))).toEqual(event);
    const slack = JSON.parse(renderEventBody(event, "slack")) as { text: string; blocks: { type: string; text?: { text: string } }[] };
    expect(slack.text).toBe("A key's outcome is unknown — `payments.charge` key `order-&lt;1&gt;` in scope `acme`");
    expect(slack.blocks[0].text!.text).toContain("timed out &amp; retried");
    expect(JSON.stringify(slack.blocks[1])).toContain(event.id);
  });
});
