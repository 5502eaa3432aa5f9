"use client";

import Link from "next/link";
import { useRouter } from "next/navigation";
import { useState } from "react";
import { ProblemAlert } from "@/components/ui/problem-alert";
import { buttonClass } from "@/components/ui/styles";
import { formatRelative, formatTimestamp } from "@/lib/console/format";
import { useAskTool, useKeyDetail, type ProbeResult } from "@/lib/console/queries/keys";
import type { KeyDetailView as Detail } from "@/lib/operator/present-key-detail";
import { AskToolButton, ProbeAnswerNotice } from "./ask-tool";
import { CopyButton } from "@/components/docs/copy-button";
import { JsonView } from "./json-view";
import { KeptArguments } from "./kept-arguments";
import { KeyActionDialog } from "./key-action-dialog";
import { StateBadge } from "./state-badge";
import { Timeline } from "./timeline";

/** States an operator may decide: held keys, and (forced) a call still within its lease. */
const DECIDABLE = new Set(["inflight", "stuck", "unknown"]);
/** States the tool's status probe is asked about: the call has ended or its holder is gone. */
const PROBEABLE_STATES = new Set(["stuck", "unknown"]);

/**
 * One key: its record, stored result and timeline. For a held key, operators decide: "It happened"
 * (resolve with the result), "It did not happen" (release), or "Ask the tool" (its status probe).
 */
export function KeyDetailView({
  initial,
  canRelease,
  canResolve,
  canProbe,
  renderedAtMs,
}: {
  initial: Detail;
  /** when the server read `initial`: "created 3 s ago" is rendered from it on the server and in the browser alike */
  renderedAtMs: number;
  canRelease: boolean;
  canResolve: boolean;
  canProbe: boolean;
}) {
  // a running call finishes or becomes stuck on its own, and the reconciler may settle a held key: keep watching
  const query = useKeyDetail(initial, renderedAtMs, (state) => (DECIDABLE.has(state) ? 5_000 : false));
  const [action, setAction] = useState<"release" | "resolve" | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [probeResult, setProbeResult] = useState<ProbeResult | null>(null);
  const router = useRouter();
  // the page's server-rendered parts (its anomalies, its audit rows) change with a decision too
  const refresh = () => router.refresh();
  const ask = useAskTool(initial.scope, initial.key, (result) => {
    setNotice(null);
    setProbeResult(result);
    refresh();
  });
  const detail = query.data;
  const r = detail.record;
  const nowMs = query.dataUpdatedAt || renderedAtMs;
  const decidable = DECIDABLE.has(detail.state);
  const showProbe = canProbe && detail.probeable && PROBEABLE_STATES.has(detail.state);

  return (
    <div className="space-y-6">
      <div className="flex flex-wrap items-start justify-between gap-4">
        <div className="min-w-0">
          <h1 className="text-xl font-semibold tracking-tight">
            <span className="sr-only">Key </span>
            <span className="font-mono text-lg break-all" data-testid="key-name">{detail.key}</span>
          </h1>
          <div className="mt-2 flex flex-wrap items-center gap-3 text-[13px] text-muted">
            <StateBadge state={detail.state} testId="key-state" resultStatus={r?.result?.status ?? null} />
            <CopyButton text={detail.key} label="Copy key" testId="copy-key" />
            {r && (
              <Link href={`/tools/${encodeURIComponent(r.tool)}`} className="font-mono text-[12.5px] text-accent hover:underline" data-testid="key-tool-link">
                {r.tool}
              </Link>
            )}
            {r && <span>created {formatRelative(r.createdAt, nowMs)}</span>}
          </div>
        </div>
        {decidable && (canRelease || canResolve || showProbe) && (
          <div className="flex flex-wrap gap-2" data-testid="key-actions">
            {showProbe && <AskToolButton pending={ask.isPending} onClick={() => ask.mutate()} />}
            {canRelease && (
              <button type="button" className={buttonClass("secondary")} onClick={() => setAction("release")} data-testid="release-button">
                It did not happen
              </button>
            )}
            {canResolve && (
              <button type="button" className={buttonClass("primary")} onClick={() => setAction("resolve")} data-testid="resolve-button">
                It happened
              </button>
            )}
          </div>
        )}
      </div>

      {detail.state === "stuck" && (
        <p className="rounded-lg border border-warn/40 bg-warn-soft px-4 py-3 text-[13px]" data-testid="held-explanation">
          The lease passed without a result: the caller probably crashed, and the side effect may or may not have happened. Retries get 409 until someone
          decides.{showProbe && <> <strong>Ask the tool</strong> first: if it can tell, the key is settled for you.</>} <strong>It did not happen</strong> releases
          the key (the next retry runs it); <strong>It happened</strong> resolves it with the result.
        </p>
      )}
      {detail.state === "unknown" && r && (
        <div className="rounded-lg border border-unknown/40 bg-unknown-soft px-4 py-3 text-[13px]" data-testid="unknown-explanation">
          <p>
            <strong className="text-unknown">Outcome unknown</strong>
            {r.outcomeNote && (
              <>
                : <span data-testid="outcome-note">{r.outcomeNote}</span>
              </>
            )}
            {r.unknownAt && (
              <span className="text-muted" title={formatTimestamp(r.unknownAt)}>
                {" "}· {formatRelative(r.unknownAt, nowMs)}
              </span>
            )}
          </p>
          <p className="mt-1">
            The action <strong>may have happened</strong>. It will not run again by itself: retries get 409 until someone decides.{" "}
            {!canRelease && !canResolve ? (
              <>An operator decides whether it happened (the key is resolved with its result) or not (the key is released and the next retry runs it).</>
            ) : (
              <>
                {detail.probeable ? (
                  <>
                    <strong>Ask the tool</strong> first: if it can tell, the key is settled for you. Otherwise check the downstream system:{" "}
                  </>
                ) : (
                  <>This tool cannot be asked whether it happened; check the downstream system: </>
                )}
                <strong>It happened</strong> resolves the key with the result, so retries get it; <strong>It did not happen</strong> releases the key, so the
                next retry runs the tool.
              </>
            )}
          </p>
        </div>
      )}
      {detail.state === "inflight" && decidable && (canRelease || canResolve) && (
        <p className="rounded-lg border border-line bg-surface-2 px-4 py-3 text-[13px] text-muted" data-testid="running-explanation">
          The call is running and its lease is valid: it may still complete. Wait for it; deciding now needs an explicit confirmation, and a result that
          arrives afterwards is flagged as a late completion.
        </p>
      )}
      {probeResult && <ProbeAnswerNotice result={probeResult} onDismiss={() => setProbeResult(null)} />}
      {ask.error && <ProblemAlert error={ask.error} testId="probe-error" />}
      {notice && (
        <p role="status" data-testid="action-notice" className="rounded-lg border border-ok/40 bg-ok-soft px-4 py-3 text-[13px]">
          {notice}
        </p>
      )}
      {query.error && <ProblemAlert error={query.error} />}

      {/* what the call was: what an operator deciding whether it happened looks for downstream */}
      {detail.arguments && (
        <section aria-labelledby="arguments-heading" className="min-w-0 rounded-xl border border-line bg-surface shadow-xs">
          <h2 id="arguments-heading" className="px-5 pt-4 text-xs font-medium tracking-wide text-muted uppercase">Arguments</h2>
          <div className="px-5 pt-2 pb-5">
            <KeptArguments value={detail.arguments.value} kept={detail.arguments.kept} />
          </div>
        </section>
      )}

      <div className="grid gap-6 lg:grid-cols-[minmax(0,1fr)_minmax(0,1fr)]">
        <section aria-labelledby="record-heading" className="min-w-0 rounded-xl border border-line bg-surface shadow-xs">
          <h2 id="record-heading" className="px-5 pt-4 text-xs font-medium tracking-wide text-muted uppercase">Record</h2>
          {r ? (
            <dl className="mt-3 divide-y divide-line border-t border-line" data-testid="key-record">
              <Row label="State"><StateBadge state={r.state} /></Row>
              <Row label="Tool" mono>{r.tool}</Row>
              <Row label="Scope" mono>{r.scope}</Row>
              <Row label="Fingerprint" mono><span className="break-all">{r.fingerprint}</span> <CopyButton text={r.fingerprint} label="Copy" /></Row>
              <Row label="Fencing token" mono>{r.token}</Row>
              <Row label="Created">{formatTimestamp(r.createdAt)}</Row>
              {/* an unknown record keeps its lease, but the lease no longer decides anything */}
              {r.leaseUntil && r.state !== "unknown" && <Row label="Lease until">{formatTimestamp(r.leaseUntil)} <span className="text-muted">({formatRelative(r.leaseUntil, nowMs)})</span></Row>}
              {r.unknownAt && <Row label="Unknown since">{formatTimestamp(r.unknownAt)} <span className="text-muted">({formatRelative(r.unknownAt, nowMs)})</span></Row>}
              {r.completedAt && <Row label="Completed">{formatTimestamp(r.completedAt)}</Row>}
              {r.expiresAt && <Row label="Expires">{formatTimestamp(r.expiresAt)} <span className="text-muted">({formatRelative(r.expiresAt, nowMs)})</span></Row>}
              <Row label="Session" mono>{r.session ?? <span className="font-sans text-faint">none</span>}</Row>
              <Row label="Execution" mono>{r.executionId ? <><span className="break-all">{r.executionId}</span> <CopyButton text={r.executionId} label="Copy" testId="copy-execution-id" /></> : <span className="font-sans text-faint">none</span>}</Row>
              {r.fallback && <Row label="Key source"><span className="text-warn">fallback (derived from the arguments)</span></Row>}
            </dl>
          ) : (
            <p className="px-5 py-4 text-[13px] text-muted" data-testid="key-absent">
              Not in the key store: released, purged after expiry, or never seen. A new call with this key runs the tool. The timeline keeps its history.
            </p>
          )}
        </section>

        <section aria-labelledby="result-heading" className="min-w-0 rounded-xl border border-line bg-surface shadow-xs">
          <h2 id="result-heading" className="px-5 pt-4 text-xs font-medium tracking-wide text-muted uppercase">Stored result</h2>
          <div className="px-5 pt-3 pb-5">
            {r?.result ? (
              <details open className="group" data-testid="key-result">
                <summary className="cursor-pointer text-[13px] text-muted select-none hover:text-fg">
                  HTTP <span className="font-mono">{r.result.status}</span>
                  {r.result.final && " · final error (replayed like a result)"} · body
                </summary>
                <JsonView value={r.result.body} />
              </details>
            ) : (
              <p className="text-[13px] text-muted">
                {!r ? "—" : r.state === "unknown" ? "No result: the call ended without one, and whether it happened is unknown." : "No result yet: the call has not completed."}
              </p>
            )}
          </div>
        </section>
      </div>

      <section aria-labelledby="timeline-heading" className="rounded-xl border border-line bg-surface shadow-xs">
        <h2 id="timeline-heading" className="px-5 pt-4 text-xs font-medium tracking-wide text-muted uppercase">Timeline</h2>
        <Timeline events={detail.timeline} />
      </section>

      {action && (
        <KeyActionDialog
          action={action}
          scope={detail.scope}
          keyName={detail.key}
          state={detail.state}
          token={detail.record?.token}
          prefill={detail.prefill}
          onClose={() => setAction(null)}
          onDone={(message) => {
            setAction(null);
            setProbeResult(null);
            setNotice(message);
            refresh();
          }}
        />
      )}
    </div>
  );
}

function Row({ label, mono, children }: { label: string; mono?: boolean; children: React.ReactNode }) {
  return (
    <div className="grid grid-cols-[8.5rem_minmax(0,1fr)] gap-4 px-5 py-2">
      <dt className="text-muted">{label}</dt>
      <dd className={mono ? "min-w-0 font-mono text-[12.5px]" : "min-w-0"}>{children}</dd>
    </div>
  );
}
