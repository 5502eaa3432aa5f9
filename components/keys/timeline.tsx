import clsx from "clsx";
import { formatDuration, formatTimestamp } from "@/lib/console/format";
import type { TimelineEventView } from "@/lib/operator/present-key-detail";
import { JsonView } from "./json-view";
import { sortedJson } from "./kept-arguments";

const OUTCOME_TONE: Record<string, string> = {
  succeeded: "text-ok",
  final_error: "text-warn",
  failed: "text-bad",
  unknown: "text-unknown",
  late_completion: "text-warn",
  released: "text-muted",
  resolved: "text-ok",
  retried: "text-muted",
};

/** Outcome names as an operator reads them; the rest are shown with spaces for underscores. */
const OUTCOME_WORDS: Record<string, string> = {
  failed: "not run (the tool said nothing happened)",
  unknown: "unknown (it may have happened)",
};

function Who({ caller, session }: { caller: string | null; session: string | null }) {
  if (!caller && !session) return null;
  return (
    <span className="text-muted">
      {caller && <> caller <span className="font-mono text-[12px]">{caller}</span></>}
      {session && <> session <span className="font-mono text-[12px]">{session}</span></>}
    </span>
  );
}

function stateOf(snapshot: unknown): string | null {
  return snapshot && typeof snapshot === "object" && "state" in snapshot ? String((snapshot as { state: unknown }).state) : null;
}

function Event({ e }: { e: TimelineEventView }) {
  switch (e.type) {
    case "intent":
      return (
        <>
          <p>
            <strong>Execution started</strong> with fencing token <span className="font-mono text-[12px]">{e.token}</span>
            {e.fallback && <span className="text-warn"> (fallback key)</span>} <Who caller={e.callerName ?? e.caller} session={e.session} />
          </p>
          <p className="text-xs text-muted">
            execution <span className="font-mono">{e.executionId}</span> · lease until {formatTimestamp(e.leaseUntil)}
          </p>
          {e.arguments != null && (
            <details className="text-xs" data-testid="timeline-arguments">
              <summary className="cursor-pointer text-muted hover:text-fg">arguments{e.argumentsKept === "redacted" ? " (redacted)" : ""}</summary>
              <JsonView value={sortedJson(e.arguments)} />
            </details>
          )}
        </>
      );
    case "outcome":
      return (
        <>
          <p>
            <strong>Outcome:</strong> <span className={clsx("font-medium", OUTCOME_TONE[e.outcome])}>{OUTCOME_WORDS[e.outcome] ?? e.outcome.replace(/_/g, " ")}</span>
            {e.resultStatus !== null && <> · HTTP <span className="font-mono text-[12px]">{e.resultStatus}</span></>}
            {e.durationMs !== null && <span className="text-muted"> · took {formatDuration(e.durationMs)}</span>}
          </p>
          {e.error && (
            <p className={clsx("font-mono text-[12px]", e.outcome === "failed" ? "text-bad" : e.outcome === "unknown" ? "text-unknown" : "text-muted")} data-testid="outcome-error">
              {e.error}
            </p>
          )}
        </>
      );
    case "closed":
      // a decision, not an outcome of the call: no duration
      return (
        <>
          <p>
            <strong>Execution closed:</strong> <span className={clsx("font-medium", OUTCOME_TONE[e.decision])}>{e.decision}</span>
            <span className="text-muted"> · execution <span className="font-mono text-[12px]">{e.executionId}</span></span>
          </p>
          {e.note && <p className="font-mono text-[12px] text-muted">{e.note}</p>}
        </>
      );
    case "suppression": {
      const otherSession = e.originalSession !== null && e.session !== e.originalSession;
      return (
        <>
          <p>
            <strong>Duplicate suppressed</strong> ({e.kind})
            {e.gapMs !== null && <> {formatDuration(e.gapMs)} after the original</>}
            {e.fallback && <span className="text-warn"> through a fallback key</span>} <Who caller={e.callerName ?? e.caller} session={e.session} />
          </p>
          {otherSession && (
            <p className="text-xs text-warn">
              another session than the original (<span className="font-mono">{e.originalSession ?? "none"}</span>): possibly a new action answered from the old result
            </p>
          )}
        </>
      );
    }
    case "operator": {
      const before = stateOf(e.before);
      const after = stateOf(e.after);
      return (
        <>
          <p>
            <strong className="capitalize">{e.action.replace(/_/g, " ")}</strong> by <span className="font-medium">{e.actor}</span>
            {(before || after) && (
              <span className="text-muted">
                {" "}· {before ?? "?"} → {after ?? "?"}
              </span>
            )}
          </p>
          <p className="text-[13px]">
            <span className="text-muted">Reason:</span> <q data-testid="timeline-reason">{e.reason}</q>
          </p>
          {(e.before != null || e.after != null) && (
            <details className="text-xs">
              <summary className="cursor-pointer text-muted hover:text-fg">before / after</summary>
              <div className="grid gap-2 md:grid-cols-2">
                <JsonView value={e.before ?? null} />
                <JsonView value={e.after ?? null} />
              </div>
            </details>
          )}
        </>
      );
    }
  }
}

const DOT: Record<TimelineEventView["type"], string> = { intent: "bg-accent", outcome: "bg-ok", closed: "bg-faint", suppression: "bg-warn", operator: "bg-fg" };
/** an outcome's dot takes its tone: green only for a stored result */
const OUTCOME_DOT: Record<string, string> = { failed: "bg-bad", unknown: "bg-unknown", final_error: "bg-warn", late_completion: "bg-warn", released: "bg-faint", retried: "bg-faint" };
const dotOf = (e: TimelineEventView) => (e.type === "outcome" ? (OUTCOME_DOT[e.outcome] ?? DOT.outcome) : DOT[e.type]);
const LABEL: Record<TimelineEventView["type"], string> = { intent: "intent", outcome: "outcome", closed: "decision", suppression: "suppression", operator: "operator action" };

/** One history for the key, oldest first: executions, their outcomes, suppressed duplicates and operator actions. */
export function Timeline({ events }: { events: TimelineEventView[] }) {
  if (events.length === 0) {
    return <p className="px-5 py-4 text-[13px] text-muted" data-testid="timeline">The audit log has nothing for this key.</p>;
  }
  return (
    <ol data-testid="timeline" className="mt-3 border-t border-line px-5 py-4">
      {events.map((e, i) => (
        <li key={i} data-testid="timeline-event" data-type={e.type} className="relative grid grid-cols-[9.5rem_minmax(0,1fr)] gap-4 pb-4 last:pb-0 max-sm:grid-cols-1 max-sm:gap-1">
          <div className="text-xs text-muted">
            <time dateTime={e.at}>{formatTimestamp(e.at)}</time>
            <div className="text-faint">{LABEL[e.type]}</div>
          </div>
          <div className="relative space-y-0.5 border-l border-line pl-4 text-[13px]">
            <span aria-hidden="true" className={clsx("absolute top-1.5 -left-[4.5px] size-2 rounded-full", dotOf(e))} />
            <Event e={e} />
          </div>
        </li>
      ))}
    </ol>
  );
}
