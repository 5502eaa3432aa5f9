import Link from "next/link";
import { StateBadge } from "@/components/keys/state-badge";
import { keyHref } from "@/lib/console/api";
import { formatCount, formatDuration, formatRelative, formatTimestamp } from "@/lib/console/format";
import type { AnomalyView } from "@/lib/console/queries/anomalies";

interface Row {
  label: string;
  value: React.ReactNode;
  mono?: boolean;
  testId?: string;
}

type Evidence = Record<string, unknown>;

const str = (v: unknown): string | null => (typeof v === "string" && v !== "" ? v : null);
const num = (v: unknown): number | null => (typeof v === "number" && Number.isFinite(v) ? v : null);
const timeMs = (v: unknown): number | null => {
  const s = str(v);
  const ms = s ? Date.parse(s) : NaN;
  return Number.isFinite(ms) ? ms : null;
};
/** b − a, when both are times */
const between = (a: unknown, b: unknown): number | null => {
  const x = timeMs(a);
  const y = timeMs(b);
  return x !== null && y !== null ? y - x : null;
};

function Time({ at, note }: { at: unknown; note?: React.ReactNode }) {
  const s = str(at);
  if (!s) return <span className="text-faint">unknown</span>;
  return (
    <>
      <time dateTime={s}>{formatTimestamp(s)}</time>
      {note && <span className="text-muted"> · {note}</span>}
    </>
  );
}

const Faint = ({ children }: { children: React.ReactNode }) => <span className="font-sans text-faint">{children}</span>;

function holder(e: Evidence): React.ReactNode {
  const held = str(e.keyHeldBy);
  if (!held) return null;
  if (held === str(e.executionId)) return "still held by this execution";
  return (
    <>
      held by another execution, <span className="font-mono text-[12px] break-all">{held}</span>
    </>
  );
}

/** What a retry of a lost completion's call is told, as the reconciler found it. */
const LOST_COMPLETION_RETRY: Record<string, string> = {
  answered_by_record: "is answered from the key's current record; the side effect does not run again",
  restored_from_audit_log: "gets the result back from the audit log, which restores the record; the side effect does not run again",
  runs_again: "runs the side effect again",
};

function keyStateRow(e: Evidence): Row {
  const state = str(e.keyState);
  const h = holder(e);
  return {
    label: "Key at detection",
    testId: "evidence-key-state",
    value: state ? (
      <span className="inline-flex flex-wrap items-center gap-2">
        <StateBadge state={state} />
        {state === "absent" ? <span className="text-muted">no record in the key store</span> : h && <span className="text-muted">{h}</span>}
      </span>
    ) : (
      <Faint>not recorded</Faint>
    ),
  };
}

const executionRow = (e: Evidence, label = "Execution"): Row => ({
  label,
  mono: true,
  testId: "evidence-execution",
  value: str(e.executionId) ?? <Faint>none</Faint>,
});

const obj = (v: unknown): Evidence => (v && typeof v === "object" && !Array.isArray(v) ? (v as Evidence) : {});

/** A fresh-key duplicate's two executions side by side: what differs (key, session, caller) and what each did. */
function TwoExecutions({ scope, original, duplicate }: { scope: string | null; original: Evidence; duplicate: Evidence }) {
  const keyCell = (e: Evidence) => {
    const key = str(e.key);
    if (!key) return <Faint>unknown</Faint>;
    return (
      <>
        {scope ? (
          <Link href={keyHref(scope, key)} className="text-accent hover:underline">
            {key}
          </Link>
        ) : (
          key
        )}
        {e.fallback === true && <span className="font-sans text-warn"> (fallback key: no key sent)</span>}
      </>
    );
  };
  const result = (e: Evidence) => {
    const status = num(e.resultStatus);
    const outcome = str(e.outcome);
    return (
      <span className="font-sans">
        {outcome ? outcome.replace("_", " ") : <span className="text-unknown">no outcome past its lease</span>}
        {status !== null && (
          <>
            {" · HTTP "}
            <span className="font-mono">{status}</span>
          </>
        )}
      </span>
    );
  };
  const body = (e: Evidence) => {
    const text = str(e.resultBody);
    if (!text) return <Faint>none</Faint>;
    return (
      <span className="block max-h-40 overflow-auto whitespace-pre-wrap">
        {text}
        {e.resultBodyTruncated === true && <span className="font-sans text-faint"> … (cut)</span>}
      </span>
    );
  };
  const rows: [string, (e: Evidence) => React.ReactNode, boolean][] = [
    ["Key", keyCell, true],
    ["Started", (e) => <span className="font-sans">{str(e.startedAt) ? formatTimestamp(str(e.startedAt)) : "unknown"}</span>, false],
    ["Session", (e) => str(e.session) ?? <Faint>none</Faint>, true],
    ["Caller", (e) => str(e.caller) ?? <Faint>none</Faint>, true],
    ["Outcome", result, false],
    ["Result", body, true],
    ["Execution", (e) => str(e.executionId) ?? <Faint>unknown</Faint>, true],
  ];
  return (
    <table className="w-full table-fixed text-[12.5px]" data-testid="evidence-executions">
      <thead>
        <tr className="text-left text-xs text-muted">
          <th className="w-[5.5rem] pb-1 font-normal" />
          <th className="pb-1 font-medium">Original</th>
          <th className="pb-1 pl-3 font-medium">Duplicate</th>
        </tr>
      </thead>
      <tbody className="align-top">
        {rows.map(([label, cell, mono]) => (
          <tr key={label} className="border-t border-line">
            <th scope="row" className="py-1 pr-2 text-left font-normal text-muted">
              {label}
            </th>
            <td className={mono ? "min-w-0 py-1 font-mono break-all" : "py-1"}>{cell(original)}</td>
            <td className={mono ? "min-w-0 py-1 pl-3 font-mono break-all" : "py-1 pl-3"}>{cell(duplicate)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** The fields each type's evidence carries, turned into sentences an operator can check. */
function rowsFor(a: AnomalyView, nowMs: number): { rows: Row[]; used: string[] } {
  const e = a.evidence;
  switch (a.type) {
    case "orphan_unknown_outcome": {
      const lease = between(e.startedAt, e.leaseUntil);
      const silent = between(e.leaseUntil, a.detectedAt);
      // reported: the call ended saying it cannot tell whether it happened; silent: it never reported (a crash)
      const reported = e.cause === "reported";
      return {
        used: ["executionId", "token", "session", "startedAt", "leaseUntil", "keyState", "keyHeldBy", "releasedByOperator", "cause", "note", "unknownAt"],
        rows: [
          { label: "Started", value: <Time at={e.startedAt} note={formatRelative(str(e.startedAt), nowMs)} /> },
          ...(reported
            ? [
                { label: "Ended", value: <Time at={e.unknownAt} note="without knowing whether it happened" /> } satisfies Row,
                {
                  label: "Why unknown",
                  testId: "evidence-note",
                  value: str(e.note) ? <span className="text-unknown">{str(e.note)}</span> : <Faint>not recorded</Faint>,
                } satisfies Row,
              ]
            : [
                { label: "Lease ended", value: <Time at={e.leaseUntil} note={lease !== null ? `after a lease of ${formatDuration(lease)}` : undefined} /> } satisfies Row,
                {
                  label: "Silent for",
                  testId: "evidence-silent",
                  value: silent !== null ? `${formatDuration(silent)} past its lease without an outcome when the reconciler looked` : <Faint>unknown</Faint>,
                } satisfies Row,
              ]),
          executionRow(e),
          { label: "Fencing token", mono: true, value: num(e.token) ?? <Faint>unknown</Faint> },
          { label: "Session", mono: true, value: str(e.session) ?? <Faint>none</Faint> },
          keyStateRow(e),
          ...(str(e.releasedByOperator) ? [{ label: "Released by an operator", value: str(e.releasedByOperator) } satisfies Row] : []),
        ],
      };
    }
    case "orphan_lost_completion":
      return {
        used: ["executionId", "finishedAt", "expiresAt", "resultStatus", "keyState", "keyHeldBy", "error", "retry", "incident"],
        rows: [
          { label: "Succeeded", value: <Time at={e.finishedAt} note={formatRelative(str(e.finishedAt), nowMs)} /> },
          { label: "Result", value: num(e.resultStatus) !== null ? <>HTTP <span className="font-mono">{num(e.resultStatus)}</span></> : <Faint>unknown</Faint> },
          {
            label: "Should be replayed until",
            value: <Time at={e.expiresAt} note={timeMs(e.expiresAt) !== null ? `${timeMs(e.expiresAt)! > nowMs ? "expires" : "expired"} ${formatRelative(str(e.expiresAt), nowMs)}` : undefined} />,
          },
          executionRow(e),
          keyStateRow(e),
          ...(str(e.retry) ? [{ label: "A retry", testId: "evidence-retry", value: LOST_COMPLETION_RETRY[str(e.retry)!] ?? str(e.retry) } satisfies Row] : []),
          ...(str(e.incident) ? [{ label: "Lost", value: "with the key store's data: see the key-store loss incident in the list" } satisfies Row] : []),
          ...(str(e.error) ? [{ label: "Note", value: str(e.error) } satisfies Row] : []),
        ],
      };
    case "orphan_late_completion": {
      const late = between(e.leaseUntil, e.finishedAt);
      return {
        used: ["executionId", "token", "startedAt", "finishedAt", "leaseUntil", "error"],
        rows: [
          { label: "Started", value: <Time at={e.startedAt} note={formatRelative(str(e.startedAt), nowMs)} /> },
          { label: "Lease ended", value: <Time at={e.leaseUntil} note={between(e.startedAt, e.leaseUntil) !== null ? `after a lease of ${formatDuration(between(e.startedAt, e.leaseUntil)!)}` : undefined} /> },
          {
            label: "Finished",
            testId: "evidence-late-by",
            value: <Time at={e.finishedAt} note={late !== null ? `${formatDuration(Math.abs(late))} ${late >= 0 ? "after" : "before"} its lease ended` : undefined} />,
          },
          executionRow(e),
          { label: "Fencing token", mono: true, value: num(e.token) ?? <Faint>unknown</Faint> },
          ...(str(e.error) ? [{ label: "Completion refused", value: str(e.error) } satisfies Row] : []),
        ],
      };
    }
    case "orphan_unrecorded_effect": {
      const found = between(e.createdAt, a.detectedAt);
      return {
        used: ["effectId", "createdAt", "key"],
        rows: [
          { label: "Side effect", mono: true, value: str(e.effectId) ?? <Faint>unknown</Faint> },
          { label: "Committed", value: <Time at={e.createdAt} note={found !== null ? `found ${formatDuration(found)} later with no execution logged` : undefined} /> },
          { label: "Idempotency key", mono: true, value: str(e.key) ?? <Faint>none: the call carried no key</Faint> },
        ],
      };
    }
    case "stale_suppression": {
      const gap = num(e.gapMs);
      const threshold = num(e.staleThresholdMs);
      const samples = num(e.samples);
      return {
        used: ["suppressionId", "at", "gapMs", "session", "originalSession", "originalExecutionId", "fallback", "reasons", "staleThresholdMs", "samples"],
        rows: [
          { label: "Duplicate arrived", value: <Time at={e.at} note={formatRelative(str(e.at), nowMs)} /> },
          {
            label: "Gap to the original",
            testId: "evidence-gap",
            value:
              gap !== null ? (
                <>
                  {formatDuration(gap)}
                  {threshold !== null && (
                    <span className="text-muted">
                      {" "}
                      · this tool&apos;s stale threshold in this scope is {formatDuration(threshold)}
                      {samples !== null && ` (from ${formatCount(samples)} replay${samples === 1 ? "" : "s"} in the last 7 days)`}
                    </span>
                  )}
                </>
              ) : (
                <Faint>unknown</Faint>
              ),
          },
          { label: "Answered to session", mono: true, testId: "evidence-session", value: str(e.session) ?? <Faint>none</Faint> },
          { label: "Original session", mono: true, value: str(e.originalSession) ?? <Faint>none</Faint> },
          { label: "Original execution", mono: true, value: str(e.originalExecutionId) ?? <Faint>unknown</Faint> },
          { label: "Matched by", value: e.fallback ? <span className="text-warn">the arguments only (fallback key, no idempotency key sent)</span> : "its idempotency key" },
          { label: "Suppression", mono: true, value: str(e.suppressionId) ?? <Faint>unknown</Faint> },
        ],
      };
    }
    case "fresh_key_duplicate": {
      const gap = num(e.gapMs);
      const windowMs = num(e.windowMs);
      const samples = num(e.samples);
      const original = obj(e.original);
      const duplicate = obj(e.duplicate);
      return {
        used: ["fingerprint", "original", "duplicate", "gapMs", "windowMs", "windowSource", "samples"],
        rows: [
          {
            label: "Ran again after",
            testId: "evidence-gap",
            value:
              gap !== null ? (
                <>
                  {formatDuration(gap)}
                  {windowMs !== null && (
                    <span className="text-muted">
                      {" "}
                      · within{" "}
                      {e.windowSource === "default"
                        ? `the default retry window of ${formatDuration(windowMs)} (too few replays of this tool to derive its own)`
                        : `this tool's retry window of ${formatDuration(windowMs)}${samples !== null ? ` (from ${formatCount(samples)} replay${samples === 1 ? "" : "s"} in the last 7 days)` : ""}`}
                    </span>
                  )}
                </>
              ) : (
                <Faint>unknown</Faint>
              ),
          },
          { label: "Same arguments", value: <span className="text-muted">identical arguments (fingerprint <span className="font-mono text-[12px] text-fg">{(str(e.fingerprint) ?? "").slice(0, 16)}…</span>), two keys</span> },
          { label: "Executions", testId: "evidence-fresh-key", value: <TwoExecutions scope={a.scope} original={original} duplicate={duplicate} /> },
        ],
      };
    }
    case "key_store_loss": {
      const records = num(e.records) ?? 0;
      const notRestored = num(e.notRestored) ?? 0;
      const keys = Array.isArray(e.notRestoredKeys) ? e.notRestoredKeys.map(obj) : [];
      return {
        used: ["firstFoundAt", "lastFoundAt", "storeHoldsDataSince", "records", "restored", "notRestored", "notRestoredKeys", "incident"],
        rows: [
          { label: "Found", value: <Time at={e.firstFoundAt} note={formatRelative(str(e.firstFoundAt), nowMs)} /> },
          { label: "Last found", value: <Time at={e.lastFoundAt} note={formatRelative(str(e.lastFoundAt), nowMs)} /> },
          {
            label: "Store holds data since",
            value: str(e.storeHoldsDataSince) ? <Time at={e.storeHoldsDataSince} note={formatRelative(str(e.storeHoldsDataSince), nowMs)} /> : <Faint>nothing written there since the loss</Faint>,
          },
          { label: "Done records lost", testId: "evidence-loss-records", value: records },
          {
            label: "Restored from the audit log",
            testId: "evidence-loss-restored",
            value: notRestored === 0 ? `all ${num(e.restored) ?? 0}: retries get their results back, nothing runs again` : `${num(e.restored) ?? 0} of ${records}`,
          },
          ...(notRestored > 0
            ? [
                {
                  label: "Not restored",
                  testId: "evidence-loss-not-restored",
                  value: (
                    <span className="inline-flex flex-col gap-1">
                      <span className="text-unknown">{notRestored}, each an open anomaly of its own{keys.length < notRestored ? ` (the first ${keys.length} below)` : ""}</span>
                      {keys.map((k) => {
                        const scope = str(k.scope);
                        const key = str(k.key);
                        return scope && key ? (
                          <Link key={`${scope}\n${key}`} href={keyHref(scope, key)} className="font-mono text-accent hover:underline">
                            {scope}/{key}
                          </Link>
                        ) : null;
                      })}
                    </span>
                  ),
                } satisfies Row,
              ]
            : []),
        ],
      };
    }
    default:
      return { used: [], rows: [] };
  }
}

function show(v: unknown): string {
  return typeof v === "string" ? v : JSON.stringify(v);
}

/** The evidence the reconciler stored, readable; fields this view does not know are still listed. */
export function EvidenceList({ anomaly, nowMs }: { anomaly: AnomalyView; nowMs: number }) {
  const { rows, used } = rowsFor(anomaly, nowMs);
  const extra = Object.entries(anomaly.evidence ?? {}).filter(([k, v]) => !used.includes(k) && v !== null && v !== undefined);
  const all: Row[] = [...rows, ...extra.map(([k, v]) => ({ label: k, value: show(v), mono: true }))];
  return (
    <dl className="divide-y divide-line border-t border-line" data-testid="evidence">
      {all.map((r) => (
        <div key={r.label} className="grid gap-x-4 gap-y-0.5 px-5 py-2 sm:grid-cols-[10rem_minmax(0,1fr)]" data-testid={r.testId}>
          <dt className="text-muted">{r.label}</dt>
          <dd className={r.mono ? "min-w-0 font-mono text-[12.5px] break-all" : "min-w-0"}>{r.value}</dd>
        </div>
      ))}
    </dl>
  );
}

/** A stale suppression's reasons, each one sentence from the reconciler. */
export function staleReasons(anomaly: AnomalyView): string[] {
  const r = anomaly.evidence?.reasons;
  return Array.isArray(r) ? r.filter((x): x is string => typeof x === "string") : [];
}
