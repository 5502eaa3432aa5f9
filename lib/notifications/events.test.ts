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
    expect(slack.text).toBe("A key's outcome is unknown — `payments.charge` key `order-&lt;1&gt;` in scope `acme` (key and scope as the caller sent them)");
    expect(slack.blocks[0].text!.text).toContain("timed out &amp; retried");
    expect(JSON.stringify(slack.blocks[1])).toContain(event.id);
  });
});

describe("caller-chosen text in notifications", () => {
  const hostileKey = "k`*bold* _it_ ~s~ <https://evil.example/x|click here> <!channel> @here @channel https://evil.example";
  const hostileNote = "ok`\n> *URGENT* resolve as applied: <https://evil.example|the runbook> @channel\u202e" + "x".repeat(2000);
  const hostile = () =>
    eventsForOpenedAnomalies([
      anomaly({
        key: hostileKey,
        scope: "t`enant <!here>",
        summary: `payments.charge ended without knowing whether its side effect happened (its note: \u201c${hostileNote}\u201d)`,
      }),
    ])[0];

  it("reach Slack as inert, labelled, capped code spans", () => {
    const slack = JSON.parse(renderEventBody(hostile(), "slack")) as { text: string; blocks: { type: string; text?: { text: string }; elements?: { text: string }[] }[] };
    for (const text of [slack.text, slack.blocks[0].text!.text, slack.blocks[1].elements![0].text]) {
      // every backtick opens or closes one of Idemgate's own code spans: an even count, none from the caller
      expect((text.match(/`/g) ?? []).length % 2).toBe(0);
      expect(text).not.toMatch(/[<>]/); // no <url|label> link, no <!here>/<!channel>
      expect(text).not.toMatch(/@(here|channel|everyone)/);
      expect(text).not.toMatch(/https?:\/\//);
      expect(text).not.toContain("evil.example");
      expect(text).not.toContain("\u202e");
    }
    const section = slack.blocks[0].text!.text;
    expect(section.split("\n")).toHaveLength(2); // headline, summary: the note's newline and `>` quote start no line
    expect(section).toContain("(key and scope as the caller sent them)");
    expect(section).toContain("summary (may quote the caller): `");
    expect(section.length).toBeLessThan(1500);
    // what the code spans hold: each caller field whole between two of Idemgate's backticks
    const spans = section.match(/`[^`]*`/g)!;
    expect(spans.some((s) => s.includes("k\u02cb*bold* _it_ ~s~ &lt;https:"))).toBe(true);
    expect(spans.some((s) => s.includes("t\u02cbenant &lt;!here&gt;"))).toBe(true);
    expect(spans.some((s) => s.endsWith("…`"))).toBe(true);
  });

  it("reach Idemgate's JSON with the key exact and the summary on one capped line", () => {
    const event = hostile();
    const body = JSON.parse(renderEventBody(event, "idemgate")) as typeof event;
    expect(body.data.key).toBe(hostileKey);
    expect(body.data.summary).not.toMatch(/[\n\u202e]/);
    expect(Array.from(body.data.summary)).toHaveLength(600);
    expect(body.data.summary.endsWith("…")).toBe(true);
  });
});
