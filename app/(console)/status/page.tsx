import type { Metadata } from "next";
import clsx from "clsx";
import { ComponentCard } from "@/components/component-card";
import { requireOperator } from "@/lib/auth/require-operator";
import { checkHealth, describeError, type Health } from "@/lib/process/health";
import type { ToolConfigStatus } from "@/lib/process/tool-config-status";
import { mcpServerRows, type McpServerRow } from "@/lib/mcp/upstream/console-view";
import { getRuntime, type Runtime } from "@/lib/server/runtime";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "Status" };

const KIND_LABELS = {
  redis: "Redis",
  postgres: "PostgreSQL server",
  pglite: "Embedded PostgreSQL (PGlite)",
  memory: "In memory (one process)",
} as const;

export default async function StatusPage() {
  await requireOperator();
  let runtime: Runtime;
  try {
    runtime = await getRuntime();
  } catch (err) {
    return <StartupError message={describeError(err)} />;
  }
  const health = await checkHealth(runtime);
  const mcpServers = mcpServerRows();
  const { config } = runtime;
  const sqlKeyStore = health.keyStore.kind !== "redis";

  return (
    <div className="space-y-6">
      <Header health={health} checkedAt={new Date()} />

      <div className="grid gap-4 md:grid-cols-2">
        <ComponentCard
          id="keystore"
          title="Key store"
          kind={health.keyStore.kind}
          kindLabel={KIND_LABELS[health.keyStore.kind]}
          description={
            sqlKeyStore
              ? "Reservations and stored results, in the audit database (no REDIS_URL set)."
              : "Reservations and stored results. Every write call reserves its key here first."
          }
          ok={health.keyStore.ok}
          rows={[
            { label: "Location", value: health.keyStore.location, mono: true, testId: "keystore-location" },
            sqlKeyStore
              ? { label: "Table", value: "idempotency_keys", mono: true }
              : { label: "Key prefix", value: `${config.redisPrefix}:`, mono: true },
            { label: "Latency", value: latency(health.keyStore), testId: "keystore-latency" },
          ]}
          error={
            health.keyStore.error
              ? {
                  message: health.keyStore.error,
                  hint: sqlKeyStore
                    ? "Write calls fail closed (503) until the database answers again."
                    : "Write calls fail closed (503) until Redis answers again. Check REDIS_URL and that the server is running (redis-cli ping).",
                }
              : undefined
          }
        />
        <ComponentCard
          id="database"
          title="Audit database"
          kind={health.database.kind}
          kindLabel={KIND_LABELS[health.database.kind]}
          description="Execution intents and outcomes, suppressions, anomalies and operator actions."
          ok={health.database.ok}
          rows={[
            { label: "Location", value: health.database.location, mono: true, testId: "database-location" },
            health.database.kind === "pglite"
              ? { label: "Data directory", value: runtime.db.location, mono: true }
              : { label: "Driver", value: "node-postgres (pg)" },
            { label: "Latency", value: latency(health.database), testId: "database-latency" },
          ]}
          error={
            health.database.error
              ? {
                  message: health.database.error,
                  hint: "Write calls fail closed (503): an execution's intent must be recorded before its tool runs. Check DATABASE_URL and that PostgreSQL accepts connections (pg_isready).",
                }
              : undefined
          }
        />
      </div>

      {health.toolConfig && <ToolConfigFile status={health.toolConfig} />}

      {mcpServers.length > 0 && <McpServers rows={mcpServers} />}

      <section className="rounded-xl border border-line bg-surface shadow-xs">
        <h2 className="px-5 pt-4 text-xs font-medium tracking-wide text-muted uppercase">Server</h2>
        <dl className="mt-3 divide-y divide-line border-t border-line">
          <Row label="Audit mode">
            <span data-testid="audit-mode" className="font-mono text-[12.5px]">
              {health.auditMode}
            </span>
            <span className="ml-3 text-muted">
              {health.auditMode === "durable"
                ? "each execution's intent is written before its tool runs"
                : "intents are written in batches: faster, but orphan detection is weaker"}
            </span>
          </Row>
          <Row label="Data directory">
            <span className="font-mono text-[12.5px]">{config.dataDir}</span>
          </Row>
          <Row label="Health endpoint">
            <a href="/api/health" className="font-mono text-[12.5px] text-accent hover:underline">
              /api/health
            </a>
          </Row>
          <Row label="Version">
            <span data-testid="version" className="font-mono text-[12.5px]">
              {health.version}
            </span>
          </Row>
        </dl>
      </section>
    </div>
  );
}

function latency(c: Health["keyStore"] | Health["database"]): string {
  return c.ok ? `${c.latencyMs < 10 ? c.latencyMs.toFixed(1) : Math.round(c.latencyMs)} ms` : "—";
}

function Header({ health, checkedAt }: { health: Health; checkedAt: Date }) {
  const ok = health.status === "ok";
  const down = [!health.keyStore.ok && "key store", !health.database.ok && "audit database"].filter(Boolean);
  return (
    <div className="flex flex-wrap items-end justify-between gap-4">
      <div>
        <h1 className="text-xl font-semibold tracking-tight">Status</h1>
        <p className="mt-1 text-muted">The key store and audit database this server uses, and whether they answer.</p>
      </div>
      <div className="flex items-center gap-3">
        <span className="text-xs text-faint">
          checked <time dateTime={checkedAt.toISOString()}>{checkedAt.toISOString().slice(11, 19)} UTC</time>
        </span>
        <a href="/status" className="rounded-md border border-line bg-surface px-2.5 py-1 text-xs font-medium text-muted hover:border-line-strong hover:text-fg">
          Refresh
        </a>
        <span
          data-testid="overall-status"
          data-status={health.status}
          className={clsx(
            "inline-flex items-center gap-2 rounded-md px-3 py-1.5 text-[13px] font-medium",
            ok ? "bg-ok-soft text-ok" : "bg-bad-soft text-bad",
          )}
        >
          <span aria-hidden="true" className={clsx("size-2 rounded-full", ok ? "bg-ok" : "bg-bad")} />
          {ok ? "All systems operational" : `Degraded: ${down.join(" and ")} unreachable`}
        </span>
      </div>
    </div>
  );
}

/**
 * The guarded MCP servers (IDEMGATE_MCP_SERVERS). One that is down is a warning, not a degraded
 * status: its tools' calls are refused as "not run" until it is back, while Idemgate and every
 * other tool keep working (and /api/health keeps answering 200 for a load balancer).
 */
function McpServers({ rows }: { rows: McpServerRow[] }) {
  const down = rows.filter((r) => r.warning).length;
  return (
    <section id="mcp-servers" data-testid="mcp-servers" className="rounded-xl border border-line bg-surface shadow-xs">
      <div className="flex flex-wrap items-baseline justify-between gap-2 px-5 pt-4">
        <h2 className="text-xs font-medium tracking-wide text-muted uppercase">Guarded MCP servers</h2>
        <span className="text-xs text-faint">
          {down === 0 ? `${rows.length} up` : `${down} of ${rows.length} not connected: their tools' calls are not run until they are back`}
        </span>
      </div>
      <ul className="mt-3 divide-y divide-line border-t border-line">
        {rows.map((row) => (
          <li
            key={row.name}
            data-testid={`mcp-server-${row.name}`}
            data-state={row.state}
            className={clsx("grid gap-x-4 gap-y-1 px-5 py-2.5 md:grid-cols-[8rem_1fr_auto]", row.warning && "bg-warn-soft/40")}
          >
            <span className="font-mono text-[12.5px] font-medium">{row.name}</span>
            <span className="min-w-0">
              <span className="block truncate font-mono text-[12.5px] text-muted" title={row.target}>
                {row.transport === "stdio" ? "stdio · " : ""}
                {row.target}
              </span>
              {row.error && (
                <span data-testid="mcp-server-error" className={clsx("mt-0.5 block text-xs break-words", row.warning ? "text-warn" : "text-muted")}>
                  {row.warning ? "" : "last error: "}
                  {row.error}
                </span>
              )}
            </span>
            <span className="flex items-center gap-3 text-xs whitespace-nowrap">
              <span className="text-faint tabular-nums">
                {row.tools} {row.tools === 1 ? "tool" : "tools"}
              </span>
              <span
                className={clsx(
                  "inline-flex items-center gap-1.5 rounded-md px-2 py-0.5 font-medium",
                  row.warning ? "bg-warn-soft text-warn" : "bg-ok-soft text-ok",
                )}
              >
                <span aria-hidden="true" className={clsx("size-1.5 rounded-full", row.warning ? "bg-warn" : "bg-ok")} />
                {row.state}
              </span>
              <time dateTime={row.since.toISOString()} className="text-faint">
                since {row.since.toISOString().slice(11, 19)} UTC
              </time>
            </span>
          </li>
        ))}
      </ul>
    </section>
  );
}

/**
 * The configuration file the tools come from (IDEMGATE_CONFIG). A reload that was refused keeps the
 * tools before it: a warning with the file's problems, not a degraded status.
 */
function ToolConfigFile({ status }: { status: ToolConfigStatus }) {
  const refused = status.reloadError;
  return (
    <section id="tool-config" data-testid="tool-config" data-state={refused ? "reload-refused" : "loaded"} className="rounded-xl border border-line bg-surface shadow-xs">
      <div className="flex flex-wrap items-baseline justify-between gap-2 px-5 pt-4">
        <h2 className="text-xs font-medium tracking-wide text-muted uppercase">Tool configuration</h2>
        <span className="text-xs text-faint">SIGHUP reloads it</span>
      </div>
      <dl className="mt-3 divide-y divide-line border-t border-line">
        <Row label="File">
          <span data-testid="tool-config-file" className="font-mono text-[12.5px]">
            {status.file}
          </span>
        </Row>
        <Row label="Serving">
          <span data-testid="tool-config-counts">
            {status.tools} {status.tools === 1 ? "tool" : "tools"}, {status.mcpServers} MCP {status.mcpServers === 1 ? "server" : "servers"}
          </span>
          {status.loadedAt && (
            <span className="ml-3 text-muted">
              read at <time dateTime={status.loadedAt.toISOString()}>{status.loadedAt.toISOString().slice(11, 19)} UTC</time>
            </span>
          )}
        </Row>
      </dl>
      {refused && (
        <div data-testid="tool-config-error" role="alert" className="border-t border-line bg-warn-soft/40 px-5 py-3">
          <p className="text-[13px] font-medium text-warn">
            The last reload (<time dateTime={refused.at.toISOString()}>{refused.at.toISOString().slice(11, 19)} UTC</time>) was refused; the tools read before it are
            still served.
          </p>
          <pre className="mt-1.5 font-mono text-[12px] whitespace-pre-wrap break-words">{refused.message}</pre>
        </div>
      )}
    </section>
  );
}

function Row({ label, children }: { label: string; children: React.ReactNode }) {
  return (
    <div className="grid grid-cols-[8rem_1fr] gap-4 px-5 py-2.5">
      <dt className="text-muted">{label}</dt>
      <dd className="min-w-0 truncate">{children}</dd>
    </div>
  );
}

function StartupError({ message }: { message: string }) {
  return (
    <div className="space-y-4">
      <h1 className="text-xl font-semibold tracking-tight">Status</h1>
      <div data-testid="runtime-error" role="alert" className="rounded-xl border border-bad/30 bg-bad-soft px-5 py-4">
        <p className="font-medium text-bad">The server could not open its key store or audit database.</p>
        <p className="mt-2 font-mono text-[12.5px] break-words">{message}</p>
        <p className="mt-2 text-[13px] text-muted">Check REDIS_URL, DATABASE_URL and IDEMGATE_DATA_DIR, then restart the server.</p>
      </div>
    </div>
  );
}
