import { createHash } from "node:crypto";
import type { Anomaly } from "@/generated/prisma/client";
import { CALLER_TEXT_LIMITS, plainCallerText, slackCallerCode, slackCode } from "./caller-text";
import type { WebhookEventType, WebhookFormat } from "./webhook-config";

/** An event as Idemgate sends it (format `idemgate`), and as the outbox keeps it. */
export interface WebhookEvent {
  /** `evt_` and 32 hex digits: the same for every endpoint and every attempt; receivers deduplicate by it */
  id: string;
  type: WebhookEventType;
  /** when the reconciler found it, or the operator acted (ISO 8601) */
  createdAt: string;
  data: {
    summary: string;
    tool: string;
    /** null for findings that are not about one key */
    scope: string | null;
    key: string | null;
    /** null for an operator's pause or resume of a tool */
    anomaly: { id: string; type: string; path: string } | null;
    /** the console page of the key (null when the finding is about no key) */
    keyPath: string | null;
    /** key.unknown / key.stuck: the call that holds the key */
    executionId: string | null;
    /** tool.paused / tool.resumed: who did it, why, and the console page of the tool */
    operator?: { actor: string; reason: string; toolPath: string };
  };
}

type OpenedAnomaly = Pick<Anomaly, "id" | "type" | "dedupeKey" | "tool" | "scope" | "key" | "summary" | "evidence" | "detectedAt">;

/** The same finding gives the same id in every process that finds it. */
export function eventIdOf(type: WebhookEventType, dedupeKey: string): string {
  return `evt_${createHash("sha256").update(`${type}\n${dedupeKey}`).digest("hex").slice(0, 32)}`;
}

function keyPathOf(scope: string | null, key: string | null): string | null {
  return scope !== null && key !== null ? `/keys/${encodeURIComponent(scope)}/${encodeURIComponent(key)}` : null;
}

/**
 * What the anomalies a reconciler pass just opened tell the endpoints: every one is `anomaly.opened`;
 * an unknown outcome is also `key.unknown` (the call said it could not tell) or `key.stuck` (it never
 * reported and its lease passed).
 */
export function eventsForOpenedAnomalies(anomalies: readonly OpenedAnomaly[]): WebhookEvent[] {
  return anomalies.flatMap((a) => {
    const evidence = (a.evidence ?? {}) as { cause?: string; executionId?: string };
    const base = (type: WebhookEventType): WebhookEvent => ({
      id: eventIdOf(type, a.dedupeKey),
      type,
      createdAt: a.detectedAt.toISOString(),
      data: {
        summary: a.summary,
        tool: a.tool,
        scope: a.scope,
        key: a.key,
        anomaly: { id: a.id, type: a.type, path: `/anomalies/${encodeURIComponent(a.id)}` },
        keyPath: keyPathOf(a.scope, a.key),
        executionId: typeof evidence.executionId === "string" ? evidence.executionId : null,
      },
    });
    const events: WebhookEvent[] = [];
    if (a.type === "orphan_unknown_outcome" && a.key !== null) events.push(base(evidence.cause === "silent" ? "key.stuck" : "key.unknown"));
    events.push(base("anomaly.opened"));
    return events;
  });
}

/**
 * An operator paused or resumed a write tool: one event per action (its audit-trail row's id), so a
 * receiver deduplicates retries of it by the event id.
 */
export function eventForToolPause(type: "tool.paused" | "tool.resumed", input: { actionId: string; tool: string; actor: string; reason: string; atMs: number }): WebhookEvent {
  return {
    id: eventIdOf(type, input.actionId),
    type,
    createdAt: new Date(input.atMs).toISOString(),
    data: {
      summary: `${input.tool} ${type === "tool.paused" ? "paused" : "resumed"} by ${input.actor}: ${input.reason}`,
      tool: input.tool,
      scope: null,
      key: null,
      anomaly: null,
      keyPath: null,
      executionId: null,
      operator: { actor: input.actor, reason: input.reason, toolPath: `/tools/${encodeURIComponent(input.tool)}` },
    },
  };
}

const HEADLINE: Record<WebhookEventType, string> = {
  "key.unknown": "A key's outcome is unknown",
  "key.stuck": "A key is stuck",
  "anomaly.opened": "An anomaly was opened",
  "tool.paused": "A tool was paused: its new calls are refused",
  "tool.resumed": "A paused tool was resumed",
};

/**
 * The request body for an endpoint's format; the signature is computed over exactly these bytes.
 * Scopes, keys and summaries (which carry a call's note) are the callers' text: the Slack message
 * shows each as an inert code span, labelled, cut to a few hundred characters
 * ({@link slackCallerCode}); Idemgate's JSON keeps the key and scope exact (receivers match on them)
 * and the summary on one line, cut the same way.
 */
export function renderEventBody(event: WebhookEvent, format: WebhookFormat): string {
  if (format === "idemgate") return JSON.stringify({ ...event, data: { ...event.data, summary: plainCallerText(event.data.summary, CALLER_TEXT_LIMITS.summary) } });
  const d = event.data;
  const tool = slackCode(d.tool);
  const where =
    d.key !== null
      ? ` — ${tool} key ${slackCallerCode(d.key, CALLER_TEXT_LIMITS.key)} in scope ${slackCallerCode(d.scope ?? "", CALLER_TEXT_LIMITS.scope)} (key and scope as the caller sent them)`
      : ` — ${tool}`;
  const text = `${HEADLINE[event.type]}${where}`;
  const summary = `summary (may quote the caller): ${slackCallerCode(d.summary, CALLER_TEXT_LIMITS.summary)}`;
  return JSON.stringify({
    text,
    blocks: [
      { type: "section", text: { type: "mrkdwn", text: `*${HEADLINE[event.type]}*${where}\n${summary}` } },
      {
        type: "context",
        elements: [
          {
            type: "mrkdwn",
            text: d.anomaly
              ? `event \`${event.id}\` · anomaly ${slackCode(d.anomaly.id)} (${slackCode(d.anomaly.type)}) · console ${slackCallerCode(d.keyPath ?? d.anomaly.path, 400)}`
              : `event \`${event.id}\` · console ${slackCallerCode(d.operator?.toolPath ?? "", 400)}`,
          },
        ],
      },
    ],
  });
}
