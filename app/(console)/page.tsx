import type { Metadata } from "next";
import Link from "next/link";
import clsx from "clsx";
import { HealthPill } from "@/components/health-pill";
import { StateBadge } from "@/components/keys/state-badge";
import { ToolActivity } from "@/components/overview/tool-activity";
import { PausedTools } from "@/components/overview/paused-tools";
import { HeldRuns } from "@/components/overview/held-runs";
import { listRecentRuns } from "@/lib/console/get-run";
import { requireOperator } from "@/lib/auth/require-operator";
import { formatCount, formatTimestamp } from "@/lib/console/format";
import { getOverview } from "@/lib/console/get-overview";
import { getRuntime } from "@/lib/server/runtime";
import { pausedToolsNow } from "@/lib/operator/pause-tool";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "Overview" };

const STATES = [
  { state: "inflight", hint: "reserved, tool running, lease valid" },
  { state: "stuck", hint: "lease passed: an operator must decide" },
  { state: "unknown", hint: "may have happened: held until the tool or an operator decides" },
  { state: "done", hint: "result stored, replayed to duplicates" },
  { state: "expired", hint: "past TTL, kept for the retention window" },
] as const;

export default async function OverviewPage() {
  await requireOperator();
  const runtime = await getRuntime();
  const [overview, heldRuns] = await Promise.all([
    getOverview(runtime),
    // a held call waits for a decision however old its run: a week of runs
    listRecentRuns(runtime, { heldOnly: true, windowMs: 7 * 24 * 60 * 60 * 1000, limit: 10 }).catch(() => []),
  ]);
  const { counts, activity, openAnomalies, health } = overview;

  return (
    <div className="space-y-8">
      <div className="flex flex-wrap items-end justify-between gap-4">
        <div>
          <h1 className="text-xl font-semibold tracking-tight">Overview</h1>
          <p className="mt-1 text-muted">Keys by state, per tool the last hour&apos;s calls and the keys held now, open anomalies and store health.</p>
        </div>
        <span className="text-xs text-faint">as of {formatTimestamp(overview.at)}</span>
      </div>

      <PausedTools tools={pausedToolsNow(runtime)} />
      <HeldRuns runs={heldRuns} />

      <section aria-labelledby="keys-heading">
        <h2 id="keys-heading" className="mb-3 text-xs font-medium tracking-wide text-muted uppercase">
          Keys by state
        </h2>
        {counts === null ? (
          <p role="alert" className="rounded-lg border border-bad/30 bg-bad-soft px-4 py-3 text-[13px] text-bad">
            The key store did not answer: {health.keyStore.error ?? "unknown error"}. See <Link href="/status" className="underline">Status</Link>.
          </p>
        ) : (
          <div className="grid grid-cols-2 gap-3 sm:grid-cols-3 lg:grid-cols-5">
            {STATES.map(({ state, hint }) => (
              <Link
                key={state}
                href={`/keys?state=${state}`}
                data-testid={`count-${state}`}
                data-count={counts[state]}
                className={clsx(
                  "group rounded-xl border bg-surface px-4 py-3.5 shadow-xs transition-colors hover:border-line-strong",
                  state === "stuck" && counts.stuck > 0 ? "border-warn/50" : state === "unknown" && counts.unknown > 0 ? "border-unknown/50" : "border-line",
                )}
              >
                <StateBadge state={state} />
                <p className="mt-2 text-2xl font-semibold tracking-tight tabular-nums">{formatCount(counts[state])}</p>
                <p className="mt-0.5 text-xs text-muted group-hover:text-fg">{hint}</p>
              </Link>
            ))}
          </div>
        )}
      </section>

      <div className="grid gap-6 lg:grid-cols-[2fr_1fr]">
        <section aria-labelledby="activity-heading" className="min-w-0 self-start rounded-xl border border-line bg-surface shadow-xs">
          <div className="flex flex-wrap items-baseline justify-between gap-x-3 px-5 pt-4">
            <h2 id="activity-heading" className="text-xs font-medium tracking-wide text-muted uppercase">
              Per tool
            </h2>
            <span className="text-xs text-faint">calls in the last hour; keys held now</span>
          </div>
          {activity.length === 0 ? (
            <p data-testid="activity-empty" className="px-5 py-6 text-[13px] text-muted">
              No calls in the last hour and no key held. Invoke a tool through the gateway (<code className="font-mono text-[12px]">POST /api/v1/tools/&#123;tool&#125;/invoke</code>) and it shows up here.
            </p>
          ) : (
            <ToolActivity activity={activity} />
          )}
        </section>

        <div className="space-y-6">
          <Link
            href="/anomalies"
            data-testid="open-anomalies"
            data-count={openAnomalies ?? ""}
            className="block rounded-xl border border-line bg-surface px-5 py-4 shadow-xs hover:border-line-strong"
          >
            <h2 className="text-xs font-medium tracking-wide text-muted uppercase">Open anomalies</h2>
            <p className={clsx("mt-2 text-2xl font-semibold tabular-nums", openAnomalies ? "text-bad" : "")}>
              {openAnomalies === null ? "—" : formatCount(openAnomalies)}
            </p>
            <p className="mt-0.5 text-xs text-muted">
              {openAnomalies === null
                ? "the audit database did not answer"
                : openAnomalies === 0
                  ? "no orphaned side effects or stale suppressions flagged"
                  : "orphaned side effects and stale suppressions to investigate"}
            </p>
          </Link>

          <section aria-labelledby="health-heading" className="rounded-xl border border-line bg-surface shadow-xs">
            <div className="flex items-baseline justify-between px-5 pt-4">
              <h2 id="health-heading" className="text-xs font-medium tracking-wide text-muted uppercase">
                Health
              </h2>
              <Link href="/status" className="text-xs text-accent hover:underline">
                Status page
              </Link>
            </div>
            <dl className="mt-3 divide-y divide-line border-t border-line">
              <div className="flex items-center justify-between gap-3 px-5 py-2.5">
                <dt className="text-muted">Key store <span className="font-mono text-[12px] text-faint">{health.keyStore.kind}</span></dt>
                <dd><HealthPill ok={health.keyStore.ok} testId="overview-keystore-status" /></dd>
              </div>
              <div className="flex items-center justify-between gap-3 px-5 py-2.5">
                <dt className="text-muted">Audit database <span className="font-mono text-[12px] text-faint">{health.database.kind}</span></dt>
                <dd><HealthPill ok={health.database.ok} testId="overview-database-status" /></dd>
              </div>
              <div className="flex items-center justify-between gap-3 px-5 py-2.5">
                <dt className="text-muted">Audit mode</dt>
                <dd className="font-mono text-[12.5px]">{health.auditMode}</dd>
              </div>
            </dl>
          </section>
        </div>
      </div>
    </div>
  );
}
