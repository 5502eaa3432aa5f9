import type { ToolPage } from "@/lib/console/get-tool-page";
import { formatDuration } from "@/lib/console/format";
import type { EffectiveDeclaration } from "@/lib/tools/declaration";
import { Card } from "./card";

/** where a tool runs, in the words the declaration and the policy both use */
export const RUNS_LABELS: Record<EffectiveDeclaration["runs"], string> = {
  in_process: "in Idemgate's process",
  upstream: "forwarded to an HTTP service",
  client: "in the caller's process, guarded over the reservation API",
  mcp: "at another MCP server",
};

/** The tool's declaration with every value in force, secrets masked (lib/tools/declaration.ts). */
export function DeclarationPanel({ page }: { page: ToolPage }) {
  const d = page.declaration;
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
