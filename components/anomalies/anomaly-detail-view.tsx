"use client";

import Link from "next/link";
import { useState } from "react";
import { KeyActionDialog } from "@/components/keys/key-action-dialog";
import { JsonView } from "@/components/keys/json-view";
import { StateBadge } from "@/components/keys/state-badge";
import { ProblemAlert } from "@/components/ui/problem-alert";
import { buttonClass } from "@/components/ui/styles";
import { keyHref } from "@/lib/console/api";
import { formatRelative, formatTimestamp } from "@/lib/console/format";
import { useAnomaly, type AnomalyView } from "@/lib/console/queries/anomalies";
import { useKeyNow, type KeyNow } from "@/lib/console/queries/keys";
import { typeInfo } from "./anomaly-types";
import { EvidenceArguments } from "./evidence-arguments";
import { EvidenceList, staleReasons } from "./evidence-list";
import { StatusDialog, statusActionsFor, type TargetStatus } from "./status-dialog";
import { AnomalyStatusBadge } from "./status-badge";

/** The reconciler writes lower-case clauses; a tool name that opens one keeps its case. */
function sentence(text: string): string {
  const first = text.split(" ", 1)[0];
  const head = first.includes(".") ? text : text.charAt(0).toUpperCase() + text.slice(1);
  return /[.!?]$/.test(head) ? head : `${head}.`;
}

const NEXT: Record<string, TargetStatus[]> = {
  open: ["acknowledged", "resolved"],
  acknowledged: ["resolved", "open"],
  resolved: ["open"],
};

/**
 * One anomaly: what happened, the evidence, and what fixes the cause. Operators change its status
 * here and, for an orphan whose key is still reserved, release or resolve the key itself.
 */
export function AnomalyDetailView(props: {
  initial: AnomalyView;
  /** the key now (not at detection): its state and its reservation's token; null when the anomaly has no key or the store did not answer */
  initialKey: KeyNow | null;
  canAcknowledge: boolean;
  canRelease: boolean;
  canResolve: boolean;
  /** when the server read `initial`: relative times render the same on the server and in the browser */
  renderedAtMs: number;
}) {
  const query = useAnomaly(props.initial, props.renderedAtMs);
  const a = query.data;
  const { scope, key } = a;
  const hasKey = scope !== null && key !== null;
  const keyNow = useKeyNow(scope, key, props.initialKey, props.renderedAtMs);
  const keyState = { data: keyNow.data?.state, error: keyNow.error };

  const [statusTarget, setStatusTarget] = useState<TargetStatus | null>(null);
  const [keyAction, setKeyAction] = useState<"release" | "resolve" | null>(null);
  const [notice, setNotice] = useState<React.ReactNode>(null);

  const info = typeInfo(a.type);
  const nowMs = query.dataUpdatedAt || props.renderedAtMs;
  const reasons = staleReasons(a);
  const keyReserved = keyState.data === "inflight" || keyState.data === "stuck" || keyState.data === "unknown";
  // a decision here is about the anomaly's call: once another call holds the key, it is made on the key's page
  const anomalyCall = typeof a.evidence?.executionId === "string" ? a.evidence.executionId : null;
  const heldByAnother = keyReserved && anomalyCall !== null && keyNow.data?.executionId !== anomalyCall;
  const keyActions = info.orphan && hasKey && keyReserved && !heldByAnother && (props.canRelease || props.canResolve);
  const readOnly = !props.canAcknowledge;

  return (
    <div className="space-y-6">
      <div className="flex flex-wrap items-start justify-between gap-4">
        <div className="min-w-0">
          <h1 className="text-xl font-semibold tracking-tight" data-testid="anomaly-type" data-type={a.type}>
            {info.label}
          </h1>
          <div className="mt-2 flex flex-wrap items-center gap-x-3 gap-y-1 text-[13px] text-muted">
            <AnomalyStatusBadge status={a.status} testId="anomaly-status" />
            <span className="font-mono text-[12.5px] text-fg">{a.tool}</span>
            <span title={formatTimestamp(a.detectedAt)}>detected {formatRelative(a.detectedAt, nowMs)}</span>
            {a.updatedAt !== a.detectedAt && <span title={formatTimestamp(a.updatedAt)}>status changed {formatRelative(a.updatedAt, nowMs)}</span>}
          </div>
        </div>
        {props.canAcknowledge && (
          <div className="flex flex-wrap gap-2" data-testid="status-actions">
            {(NEXT[a.status] ?? []).map((target) => (
              <button
                key={target}
                type="button"
                className={buttonClass(target === "resolved" ? "primary" : "secondary")}
                onClick={() => setStatusTarget(target)}
                data-testid={`status-${target}`}
              >
                {statusActionsFor(a.type)[target].button}
              </button>
            ))}
          </div>
        )}
      </div>

      <div className="rounded-xl border border-line bg-surface px-5 py-4 shadow-xs">
        <p className="text-[14px] leading-relaxed" data-testid="anomaly-summary">
          {sentence(a.summary)}
        </p>
        {info.explanation && <p className="mt-1.5 text-[13px] text-muted">{info.explanation}</p>}
      </div>

      {notice && (
        <div role="status" data-testid="action-notice" className="flex items-start justify-between gap-4 rounded-lg border border-ok/40 bg-ok-soft px-4 py-3 text-[13px]">
          <p>{notice}</p>
          <button type="button" className={buttonClass("ghost", "sm")} onClick={() => setNotice(null)} aria-label="Dismiss">
            Dismiss
          </button>
        </div>
      )}
      {query.error && <ProblemAlert error={query.error} />}

      <div className="grid gap-6 lg:grid-cols-[minmax(0,3fr)_minmax(0,2fr)]">
        <section aria-labelledby="evidence-heading" className="min-w-0 self-start rounded-xl border border-line bg-surface shadow-xs">
          <h2 id="evidence-heading" className="px-5 pt-4 text-xs font-medium tracking-wide text-muted uppercase">
            Evidence
          </h2>
          {reasons.length > 0 && (
            <div className="px-5 pt-3 pb-4">
              <p className="text-[13px] font-medium">Why it looks like a new action</p>
              <ul className="mt-1.5 list-disc space-y-1 pl-5 text-[13px]" data-testid="stale-reasons">
                {reasons.map((r) => (
                  <li key={r}>{sentence(r)}</li>
                ))}
              </ul>
            </div>
          )}
          <div className="mt-3">
            <EvidenceList anomaly={a} nowMs={nowMs} />
          </div>
          <EvidenceArguments items={a.arguments} />
          <details className="border-t border-line px-5 py-3" data-testid="raw-evidence">
            <summary className="cursor-pointer text-[13px] text-muted select-none hover:text-fg">Raw evidence (JSON)</summary>
            <JsonView value={a.evidence} />
          </details>
        </section>

        <div className="min-w-0 space-y-6">
          <section aria-labelledby="todo-heading" className="rounded-xl border border-line bg-surface px-5 py-4 shadow-xs">
            <h2 id="todo-heading" className="text-xs font-medium tracking-wide text-muted uppercase">
              What to do
            </h2>
            <p className="mt-2 text-[13px] leading-relaxed" data-testid="what-to-do">
              {info.todo || "Read the evidence and the key's timeline, fix the cause, then mark this anomaly resolved."}
            </p>
            {readOnly && (
              <p className="mt-3 text-xs text-muted" data-testid="read-only-note">
                You have read-only access: an operator can release or resolve the key and change this anomaly&apos;s status.
              </p>
            )}
          </section>

          <section aria-labelledby="key-heading" className="rounded-xl border border-line bg-surface shadow-xs">
            <h2 id="key-heading" className="px-5 pt-4 text-xs font-medium tracking-wide text-muted uppercase">
              Key
            </h2>
            {hasKey ? (
              <div className="space-y-3 px-5 pt-3 pb-4">
                <div className="min-w-0">
                  <Link href={keyHref(scope, key)} className="font-mono text-[12.5px] break-all text-accent hover:underline" data-testid="key-link">
                    {key}
                  </Link>
                  <p className="font-mono text-[11px] text-faint">scope {scope}</p>
                </div>
                <p className="flex flex-wrap items-center gap-2 text-[13px] text-muted">
                  Now:{" "}
                  {keyState.data ? <StateBadge state={keyState.data} testId="key-state-now" /> : <span className="text-faint">{keyState.error ? "the key store did not answer" : "…"}</span>}
                  {(keyState.data === "stuck" || keyState.data === "unknown") && <span>retries get 409 until someone decides</span>}
                </p>
                <div className="flex flex-wrap gap-2">
                  <Link href={`${keyHref(scope, key)}#timeline-heading`} className={buttonClass("secondary", "sm")} data-testid="timeline-link">
                    Key timeline
                  </Link>
                  {keyActions && props.canRelease && (
                    <button type="button" className={buttonClass("secondary", "sm")} onClick={() => setKeyAction("release")} data-testid="key-release">
                      It did not happen…
                    </button>
                  )}
                  {keyActions && props.canResolve && (
                    <button type="button" className={buttonClass("secondary", "sm")} onClick={() => setKeyAction("resolve")} data-testid="key-resolve">
                      It happened…
                    </button>
                  )}
                </div>
                {info.orphan && hasKey && keyReserved && !readOnly && !heldByAnother && (
                  <p className="text-xs text-muted">It did not happen: release the key, so the next retry runs it. It happened: resolve it with its result.</p>
                )}
                {info.orphan && heldByAnother && (
                  <p className="text-xs text-muted" data-testid="key-held-by-another">
                    Another call holds this key now, not the one this anomaly is about: decide about it on the key&apos;s page.
                  </p>
                )}
              </div>
            ) : (
              <p className="px-5 pt-3 pb-4 text-[13px] text-muted">
                No idempotency key: the side effect was committed by a call that sent none. Look for it in the tool&apos;s own records.
              </p>
            )}
          </section>
        </div>
      </div>

      {statusTarget && (
        <StatusDialog
          anomaly={a}
          target={statusTarget}
          onClose={() => setStatusTarget(null)}
          onDone={(updated) => {
            setStatusTarget(null);
            setNotice(
              <>
                Now <strong>{updated.status}</strong>. Recorded with your reason in the{" "}
                <Link href="/audit" className="font-medium text-accent underline">
                  audit trail
                </Link>
                .
              </>,
            );
          }}
        />
      )}
      {keyAction && hasKey && (
        <KeyActionDialog
          action={keyAction}
          scope={scope}
          keyName={key}
          state={keyState.data ?? "absent"}
          token={keyNow.data?.token ?? undefined}
          prefill={keyNow.data?.prefill}
          onClose={() => setKeyAction(null)}
          onDone={(message) => {
            setKeyAction(null);
            setNotice(
              <>
                {message} {a.status !== "resolved" && "If that deals with the cause, mark this anomaly resolved."}
              </>,
            );
          }}
        />
      )}
    </div>
  );
}
