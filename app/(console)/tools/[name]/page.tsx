import { randomUUID } from "node:crypto";
import type { Metadata } from "next";
import Link from "next/link";
import { notFound } from "next/navigation";
import clsx from "clsx";
import { ActivityChart } from "@/components/tools/activity-chart";
import { FreshKeyFigure } from "@/components/tools/fresh-key-figure";
import { GapHistogram } from "@/components/tools/gap-histogram";
import { InvokeForm } from "@/components/tools/invoke-form";
import { KeyBadge, KindBadge } from "@/components/tools/kind-badge";
import { McpOriginBadge } from "@/components/tools/mcp-origin-badge";
import { PassThroughCalls } from "@/components/tools/pass-through-calls";
import { PausePanel } from "@/components/tools/pause-panel";
import { SuppressionLog } from "@/components/tools/suppression-log";
import { WindowPicker } from "@/components/tools/window-picker";
import { fmt } from "@/lib/audit/retry-gaps";
import { staleFlagsFor, type StaleFlag } from "@/lib/anomalies/stale-flags";
import { DEFAULT_WINDOW, getToolStats, isStatsWindow, OUTCOMES, STATS_WINDOWS, type ToolStats } from "@/lib/audit/tool-stats";
import { requireOperator } from "@/lib/auth/require-operator";
import { can } from "@/lib/auth/roles";
import { headingId } from "@/lib/docs/guides";
import { exampleFromSchema } from "@/lib/docs/json-schema";
import { executionsNote, formatCount, formatDuration } from "@/lib/console/format";
import { metadataParam, pageParam } from "@/lib/console/page-param";
import { mcpToolOrigin, recentPassThroughCalls, type McpToolOrigin } from "@/lib/mcp/upstream/console-view";
import { getRuntime } from "@/lib/server/runtime";
import { toolPause } from "@/lib/operator/pause-tool";
import type { ToolDescription } from "@/lib/tools";
import { effectiveDeclaration, type EffectiveDeclaration } from "@/lib/tools/declaration";

export const dynamic = "force-dynamic";

type Props = { params: Promise<{ name: string }>; searchParams: Promise<{ window?: string | string[] }> };

export async function generateMetadata({ params }: Props): Promise<Metadata> {
  return { title: metadataParam((await params).name) };
}

export default async function ToolPage({ params, searchParams }: Props) {
  const operator = await requireOperator();
  const name = pageParam((await params).name);
  const rawWindow = (await searchParams).window;
  const window = isStatsWindow(rawWindow) ? rawWindow : DEFAULT_WINDOW;
  const runtime = await getRuntime();
  if (name === null || !runtime.registry.has(name)) notFound();
  const definition = runtime.registry.get(name);
  const tool = runtime.registry.describe(definition);
  const mcpOrigin = mcpToolOrigin(definition);
  const declaration = effectiveDeclaration(definition, tool, mcpOrigin?.server ?? null);
  const write = tool.kind === "write";
  const stats = write ? await getToolStats(runtime.db.prisma, { tool: name, windowMs: STATS_WINDOWS[window] }) : null;
  // the log's rows the reconciler flagged as stale, each with its anomaly
  const staleFlags = stats ? await staleFlagsFor(runtime.db.prisma, stats.suppressionLog.map((s) => s.id)) : new Map<string, StaleFlag>();
  // a pass-through tool (idempotent by its own word): not gated, but every call is in the audit log
  const passThrough = !write && definition.audited ? await recentPassThroughCalls(runtime.db.prisma, name) : null;
  const basePath = `/tools/${encodeURIComponent(name)}`;

  return (
    <div className="space-y-6">
      <div>
        <nav aria-label="Breadcrumb" className="text-xs text-muted">
          <Link href="/tools" className="hover:text-fg">
            Tools
          </Link>
          <span className="px-1.5 text-faint">/</span>
        </nav>
        <div className="mt-1 flex flex-wrap items-end justify-between gap-4">
          <div className="min-w-0">
            <div className="flex flex-wrap items-center gap-2">
              <h1 className="font-mono text-xl font-semibold tracking-tight">{tool.name}</h1>
              <KindBadge kind={tool.kind} />
              {write && <KeyBadge mode={tool.idempotencyKey} />}
              {mcpOrigin && <McpOriginBadge origin={mcpOrigin} />}
            </div>
            <p className="mt-1 max-w-3xl text-muted">{tool.description}</p>
            {mcpOrigin && (
              <p data-testid="mcp-origin-detail" className="mt-1 max-w-3xl text-xs text-muted">
                Proxied from <span className="font-mono">{mcpOrigin.tool}</span> at the MCP server{" "}
                <span className="font-mono">{mcpOrigin.server}</span> (IDEMGATE_MCP_SERVERS): {mcpOrigin.gateLabel}.{" "}
                <Link href="/status#mcp-servers" className="text-accent hover:underline">
                  Server status
                </Link>
              </p>
            )}
          </div>
          {write && <WindowPicker basePath={basePath} current={window} />}
        </div>
      </div>

      {write && <PausePanel state={await toolPause(runtime, name)} canPause={can(operator.role, "pause_tools")} />}

      {stats ? (
        <>
          <Summary stats={stats} window={window} />
          <FreshKeyFigure counts={stats.freshKeyDuplicates} window={window} />

          <Card title="Calls over time" aside={`${formatDuration(stats.bucketMs)} buckets · UTC`}>
            <div className="px-5 pt-3 pb-4">
              {stats.totals.executions + stats.totals.suppressions === 0 ? (
                <p className="py-10 text-center text-[13px] text-muted">No calls to {tool.name} in the last {window}.</p>
              ) : (
                <ActivityChart buckets={stats.buckets} bucketMs={stats.bucketMs} />
              )}
            </div>
          </Card>

          <div className="grid gap-6 lg:grid-cols-[3fr_2fr] lg:items-start">
            <RetryGaps stats={stats} tool={tool} window={window} />
            <Policy tool={tool} mcpOrigin={mcpOrigin} declaredIn={declaration.declaredIn} />
          </div>
        </>
      ) : (
        <div className="grid gap-6 lg:grid-cols-[3fr_2fr] lg:items-start">
          <Card title="Not gated">
            <p className="px-5 py-4 text-[13px] text-muted">
              {mcpOrigin?.gate === "idempotent"
                ? `${tool.name} is marked idempotent by its MCP server (idempotentHint): repeating it changes nothing more, so calls are passed through without a key and are never deduplicated; each call is recorded in the audit log (below).`
                : `${tool.name} is a read tool: it has no side effect to protect, so calls never take a key, are never deduplicated and leave no executions or suppressions in the audit log.`}{" "}
              The form below runs it through the gateway like any caller.
            </p>
          </Card>
          <Policy tool={tool} mcpOrigin={mcpOrigin} declaredIn={declaration.declaredIn} />
        </div>
      )}

      <Declaration d={declaration} />

      {declaration.runs === "client" ? (
        <Card title="How it is guarded" aside={`POST /api/v1/tools/${tool.name}/reservations`} testId="client-guard-card">
          <p className="px-5 py-4 text-[13px] text-muted">
            {tool.name} runs in its caller&apos;s process, so Idemgate never runs it and it cannot be invoked from here. The caller wraps
            the function in <code className="font-mono text-[12.5px]">guard()</code> (TypeScript) or{" "}
            <code className="font-mono text-[12.5px]">@idempotent</code> (Python): Idemgate reserves the key, and the function runs only
            for a new key; its result is stored and replayed to every retry.{" "}
            <Link href={`/docs/integrate#${headingId("Guard a function where it runs")}`} className="text-accent hover:underline">
              Guard a function where it runs
            </Link>
          </p>
        </Card>
      ) : (
        <Card title="Invoke through the gateway" aside={`POST /api/v1/tools/${tool.name}/invoke`} testId="invoke-card">
          <InvokeForm
            tool={{ name: tool.name, kind: tool.kind, idempotencyKey: tool.idempotencyKey, fallbackTtlMs: tool.fallbackTtlMs }}
            exampleArguments={JSON.stringify(exampleFromSchema(tool.argumentsSchema), null, 2)}
            initialKey={randomUUID()}
            canInvoke={can(operator.role, "invoke")}
            role={operator.role}
          />
        </Card>
      )}

      {passThrough && (
        <Card title="Recent calls" aside={passThrough.length === 0 ? undefined : `latest ${passThrough.length} · over MCP or HTTP`} testId="pass-through-card">
          <PassThroughCalls calls={passThrough} />
        </Card>
      )}

      {stats && (
        <Card
          title="Suppression log"
          aside={stats.suppressionLog.length === 0 ? undefined : `latest ${stats.suppressionLog.length} of ${formatCount(stats.totals.suppressions)} in the last ${window}`}
        >
          <SuppressionLog entries={stats.suppressionLog} staleFlags={Object.fromEntries(staleFlags)} />
        </Card>
      )}
    </div>
  );
}

function Card({ title, aside, children, testId }: { title: string; aside?: string; children: React.ReactNode; testId?: string }) {
  return (
    <section data-testid={testId} className="min-w-0 overflow-hidden rounded-xl border border-line bg-surface shadow-xs">
      <div className="flex flex-wrap items-baseline justify-between gap-2 border-b border-line px-5 py-3">
        <h2 className="text-xs font-medium tracking-wide text-muted uppercase">{title}</h2>
        {aside && <span className="font-mono text-[11.5px] text-faint">{aside}</span>}
      </div>
      {children}
    </section>
  );
}

function Stat({ label, value, sub, testId }: { label: string; value: React.ReactNode; sub?: React.ReactNode; testId?: string }) {
  return (
    <div data-testid={testId} className="rounded-xl border border-line bg-surface px-4 py-3.5 shadow-xs">
      <p className="text-xs text-muted">{label}</p>
      <p className="mt-1 text-2xl font-semibold tracking-tight tabular-nums">{value}</p>
      {sub && <div className="mt-0.5 text-xs text-muted">{sub}</div>}
    </div>
  );
}

const OUTCOME_TONE: Record<string, string> = {
  succeeded: "text-ok",
  failed: "text-bad",
  final_error: "text-warn",
  late_completion: "text-warn",
  released: "text-muted",
  unknown: "text-muted",
};

function Summary({ stats, window }: { stats: ToolStats; window: string }) {
  const { totals } = stats;
  const calls = totals.executions + totals.suppressions;
  const rate = calls === 0 ? null : totals.suppressions / calls;
  return (
    <div className="grid grid-cols-2 gap-3 lg:grid-cols-4">
      <Stat label={`Executions · ${window}`} value={formatCount(totals.executions)} sub={executionsNote(totals.executions, stats.outcomes)} testId="stat-executions" />
      <Stat
        label={`Suppressed · ${window}`}
        value={formatCount(totals.suppressions)}
        sub={rate === null ? "no calls" : `${(Math.round(rate * 1000) / 10).toString()}% of calls · ${formatCount(totals.replay)} ${totals.replay === 1 ? "replay" : "replays"}`}
        testId="stat-suppressions"
      />
      {/* two columns of outcomes need the full width of a phone */}
      <div data-testid="stat-outcomes" className="col-span-2 rounded-xl border border-line bg-surface px-4 py-3.5 shadow-xs lg:col-span-1">
        <p className="text-xs text-muted">Outcomes</p>
        <dl className="mt-1.5 grid grid-cols-2 gap-x-3 gap-y-0.5 text-xs">
          {OUTCOMES.filter((o) => o !== "released" || stats.outcomes.released > 0).map((o) => (
            <div key={o} className="flex justify-between gap-2">
              <dt className="min-w-0 text-muted">{o.replace("_", " ")}</dt>
              <dd className={clsx("tabular-nums", stats.outcomes[o] > 0 ? OUTCOME_TONE[o] : "text-faint")}>{formatCount(stats.outcomes[o])}</dd>
            </div>
          ))}
        </dl>
      </div>
      <Stat
        label="Duration p50 / p95"
        value={stats.durationMs.p50 === null ? "—" : formatDuration(stats.durationMs.p50)}
        sub={stats.durationMs.p95 === null ? "no finished executions" : `p95 ${formatDuration(stats.durationMs.p95)}`}
        testId="stat-duration"
      />
    </div>
  );
}

function RetryGaps({ stats, tool, window }: { stats: ToolStats; tool: ToolDescription; window: string }) {
  const g = stats.gaps;
  const ttl = g.suggestedTtlMs;
  const rows: [string, string][] = [
    ["replays", formatCount(g.samples)],
    ["p50", g.p50Ms === null ? "—" : fmt(g.p50Ms)],
    ["p99", g.p99Ms === null ? "—" : fmt(g.p99Ms)],
    ["p99.9", g.p999Ms === null ? "—" : fmt(g.p999Ms)],
    ["retry cluster up to", g.retryClusterMaxMs === null ? "—" : fmt(g.retryClusterMaxMs)],
    ["first genuine repeat", g.firstRepeatGapMs === null ? "none seen" : fmt(g.firstRepeatGapMs)],
    ["stale threshold", fmt(g.staleThresholdMs)],
  ];
  return (
    <Card title="Retry gaps" aside={`replays, last ${window}`} testId="retry-gaps">
      <div className="space-y-4 px-5 pt-4 pb-5">
        <div>
          <p data-testid="suggested-ttl" className="text-[15px] font-semibold tracking-tight">
            {ttl === null ? "No fallback TTL suggested yet" : `Suggested fallback TTL: ${fmt(ttl)}`}
            {ttl !== null && tool.fallbackTtlMs !== null && (
              <span className="ml-2 text-xs font-normal text-muted">configured: {fmt(tool.fallbackTtlMs)}</span>
            )}
          </p>
          <p data-testid="gap-reasoning" className="mt-1 text-[13px] text-muted">
            {g.reasoning.charAt(0).toUpperCase() + g.reasoning.slice(1)}.
          </p>
        </div>
        {g.samples > 0 ? (
          <GapHistogram
            histogram={g.histogram}
            suggestedTtlMs={ttl}
            staleThresholdMs={g.staleThresholdMs}
            labels={{ ttl: ttl === null ? null : fmt(ttl), stale: fmt(g.staleThresholdMs) }}
          />
        ) : (
          <p className="rounded-lg border border-dashed border-line py-8 text-center text-[13px] text-muted">
            The histogram fills as duplicates arrive: each replay records how long after the original it came.
          </p>
        )}
        <dl data-testid="gap-evidence" className="grid grid-cols-2 gap-x-6 gap-y-1 text-[12.5px] sm:grid-cols-4">
          {rows.map(([label, value]) => (
            <div key={label} className="flex flex-col">
              <dt className="text-xs text-muted">{label}</dt>
              <dd className="font-medium tabular-nums">{value}</dd>
            </div>
          ))}
        </dl>
        <p className="text-xs text-faint">
          {tool.fallbackTtlMs === null
            ? "This tool takes explicit keys, so its TTL can safely be long. A replay far beyond the retry cluster usually means a caller reuses one key for several actions (per conversation instead of per action)."
            : "Keyless calls are deduplicated by their arguments for the fallback TTL: long enough to catch the retries, short enough not to swallow a genuine repeat of the same action."}
          {g.truncated && " Based on the newest 20,000 replays of the window."}
        </p>
      </div>
    </Card>
  );
}

const RUNS_LABELS: Record<EffectiveDeclaration["runs"], string> = {
  in_process: "in Idemgate's process",
  upstream: "forwarded to an HTTP service",
  client: "in the caller's process, guarded over the reservation API",
  mcp: "at another MCP server",
};

/** The tool's declaration with every value in force, secrets masked (lib/tools/declaration.ts). */
function Declaration({ d }: { d: EffectiveDeclaration }) {
  const rows: [string, React.ReactNode, string?][] = [
    ["Declared in", <span key="d" className="font-mono text-[12.5px]">{d.declaredIn}</span>],
    ["Kind", d.kind],
    ["Runs", RUNS_LABELS[d.runs]],
    ...(d.kind === "write"
      ? ([
          ["TTL", `${formatDuration(d.ttlMs)} (${d.ttlMs} ms)`],
          ["Lease", `${formatDuration(d.leaseMs)} (${d.leaseMs} ms)`],
          ["Stuck policy", d.stuckPolicy],
          ["Fallback dedupe", d.fallbackTtlMs === null ? "off" : `${formatDuration(d.fallbackTtlMs)} (${d.fallbackTtlMs} ms)`],
        ] as [string, React.ReactNode][])
      : []),
    ...(d.upstream
      ? ([
          ["Upstream", <span key="u" data-testid="declaration-upstream-url" className="font-mono text-[12.5px] break-all">{`${d.upstream.method} ${d.upstream.url}`}</span>, "user info and query string are not shown"],
          ["Timeout", `${d.upstream.timeoutMs} ms`],
          ...(d.upstream.preset ? ([["Preset", d.upstream.preset, "the declaration's own fields override it"]] as [string, React.ReactNode, string?][]) : []),
          ["Request", `${d.upstream.body} body${d.upstream.query.length ? `; query: ${d.upstream.query.join(", ")}` : ""}${d.upstream.repeatInBody.length ? `; also in the body: ${d.upstream.repeatInBody.join(", ")}` : ""}`],
          ["Key header", `${d.upstream.keyHeader}${d.upstream.keyMaxLength !== null ? ` (at most ${d.upstream.keyMaxLength} characters)` : ""}`],
          [
            "Status probe",
            d.upstream.probe === "resend"
              ? `resend: the same request with the same key${d.upstream.keyRetentionMs !== null ? `, within ${formatDuration(d.upstream.keyRetentionMs)} of the call` : ""}`
              : d.upstream.statusUrl ? <span key="s" className="font-mono text-[12.5px] break-all">{`GET ${d.upstream.statusUrl}`}</span> : "none",
          ],
          ...(d.upstream.outcomes.length
            ? ([["Answers", d.upstream.outcomes.map((o) => `${o.status}${o.when ? ` with ${Object.entries(o.when).map(([k, v]) => `${k}=${String(v)}`).join(", ")}` : ""} → ${o.outcome}`).join("; "), "overrides of the default classes"]] as [string, React.ReactNode, string?][])
            : []),
          ["Dedupes", d.dedupes ? "yes: unknown outcomes are resent with the same key" : "no"],
          [
            "Headers",
            d.upstream.headers.length === 0 ? "none" : (
              <span key="h" data-testid="declaration-headers" className="block font-mono text-[12.5px]">
                {d.upstream.headers.map((h) => (
                  <span key={h.name} className="block">
                    {h.name}: {h.value}
                  </span>
                ))}
              </span>
            ),
            d.upstream.headers.length === 0 ? undefined : "values masked",
          ],
        ] as [string, React.ReactNode, string?][])
      : []),
    ...(d.arguments ? ([["Arguments kept", `${d.arguments.keep}${d.arguments.redact.length ? ` (also ${d.arguments.redact.join(", ")})` : ""}`]] as [string, React.ReactNode][]) : []),
  ];
  return (
    <Card title="Declaration" aside="effective values, secrets masked" testId="tool-declaration">
      {/* minmax(0, 1fr) columns: the schema's long lines scroll inside their box, never widen the card past the screen */}
      <div className="grid grid-cols-1 gap-0 lg:grid-cols-2">
        <dl className="divide-y divide-line">
          {rows.map(([label, value, hint]) => (
            <div key={label} className="grid grid-cols-[7rem_1fr] gap-3 px-5 py-2 sm:grid-cols-[8.5rem_1fr]">
              <dt className="text-muted">{label}</dt>
              <dd className="min-w-0 wrap-anywhere">
                {value}
                {hint && <p className="text-xs text-muted">{hint}</p>}
              </dd>
            </div>
          ))}
        </dl>
        <div className="min-w-0 border-t border-line px-5 py-3 lg:border-t-0 lg:border-l">
          <p className="text-xs text-muted">inputSchema (validated before a key is taken; advertised in OpenAPI and MCP)</p>
          <pre tabIndex={0} data-testid="declaration-input-schema" className="mt-1.5 max-h-80 overflow-y-auto font-mono text-[12px] whitespace-pre-wrap wrap-anywhere">
            {JSON.stringify(d.inputSchema, null, 2)}
          </pre>
        </div>
      </div>
    </Card>
  );
}

function Policy({ tool, mcpOrigin, declaredIn }: { tool: ToolDescription; mcpOrigin: McpToolOrigin | null; declaredIn: string }) {
  const write = tool.kind === "write";
  // the same words as the declaration's "Runs"
  const runs = mcpOrigin ? `at the MCP server ${mcpOrigin.server}` : RUNS_LABELS[tool.source];
  const rows: [string, React.ReactNode, string][] = write
    ? [
        ["Result TTL", formatDuration(tool.ttlMs), "how long a stored result is replayed"],
        ["Lease", formatDuration(tool.leaseMs), "how long a running call is trusted before it counts as stuck"],
        ["When stuck", <span key="s" className="font-mono text-[12.5px]">{tool.stuckPolicy}</span>, tool.stuckPolicy === "block" ? "an operator decides: release or resolve" : "the next call runs the side effect again"],
        [
          "Fallback dedupe",
          tool.fallbackTtlMs === null ? "off" : formatDuration(tool.fallbackTtlMs),
          tool.fallbackTtlMs === null ? "a write without a key is refused (400)" : "keyless calls are deduplicated by their arguments",
        ],
        ["Idempotency-Key", tool.idempotencyKey, ""],
        ["Runs", runs, ""],
      ]
    : [
        ["Idempotency-Key", "unused", mcpOrigin?.gate === "idempotent" ? "passed through: idempotent by its server's word" : "read tools are never gated"],
        ["Runs", runs, ""],
      ];
  return (
    <Card title="Policy" testId="tool-policy">
      <dl className="divide-y divide-line">
        {rows.map(([label, value, hint]) => (
          <div key={label} className="grid grid-cols-[8.5rem_1fr] gap-3 px-5 py-2.5">
            <dt className="text-muted">{label}</dt>
            <dd className="min-w-0">
              <span className="font-medium">{value}</span>
              {hint && <p className="text-xs text-muted">{hint}</p>}
            </dd>
          </div>
        ))}
      </dl>
      <p className="border-t border-line px-5 py-2.5 text-xs text-faint">
        {mcpOrigin ? (
          <>
            From its server&apos;s annotations (<code className="font-mono">IDEMGATE_MCP_SERVERS</code>).
          </>
        ) : (
          <>
            Declared in <code className="font-mono">{declaredIn}</code>.
          </>
        )}
      </p>
    </Card>
  );
}
