import type { Metadata } from "next";
import { headers } from "next/headers";
import Link from "next/link";
import clsx from "clsx";
import { CopyButton } from "@/components/docs/copy-button";
import { KeyBadge, KindBadge } from "@/components/tools/kind-badge";
import { TableHead } from "@/components/ui/table-head";
import { requireOperator } from "@/lib/auth/require-operator";
import { curlExample, toolOperations, type OperationReference } from "@/lib/docs/openapi-reference";
import { allProblemDocs, RETRY_LABELS } from "@/lib/docs/problem-docs";
import { formatDuration } from "@/lib/console/format";
import { getRuntime } from "@/lib/server/runtime";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "API reference" };

async function baseUrl(): Promise<string> {
  const h = await headers();
  const host = h.get("x-forwarded-host") ?? h.get("host") ?? "localhost:3000";
  const proto = h.get("x-forwarded-proto") ?? (host.startsWith("localhost") || host.startsWith("127.") ? "http" : "https");
  return `${proto}://${host}`;
}

export default async function ApiReferencePage() {
  await requireOperator();
  const runtime = await getRuntime();
  const base = await baseUrl();
  const operations = toolOperations(runtime.registry.openApiDocument(base));
  const problems = allProblemDocs();

  return (
    <div className="grid gap-8 lg:grid-cols-[12rem_1fr]">
      <aside className="hidden lg:block">
        <nav aria-label="On this page" className="sticky top-20 space-y-4 text-[13px]">
          <div>
            <p className="mb-1.5 text-xs font-medium tracking-wide text-muted uppercase">Basics</p>
            <ul className="space-y-1">
              <li><a href="#calling" className="text-muted hover:text-fg">Calling a tool</a></li>
              <li><a href="#errors" className="text-muted hover:text-fg">Errors</a></li>
            </ul>
          </div>
          <div>
            <p className="mb-1.5 text-xs font-medium tracking-wide text-muted uppercase">Tools</p>
            <ul className="space-y-1">
              {operations.map((op) => (
                <li key={op.tool}>
                  <a href={`#${op.tool}`} className="block truncate font-mono text-[12px] text-muted hover:text-fg">
                    {op.tool}
                  </a>
                </li>
              ))}
            </ul>
          </div>
        </nav>
      </aside>

      <div className="min-w-0 space-y-8">
        <div>
          <h1 className="text-xl font-semibold tracking-tight">API reference</h1>
          <p className="mt-1 max-w-3xl text-muted">
            The gateway API, generated from the tools&apos; schemas. Machine-readable:{" "}
            <a href="/api/v1/openapi.json" data-testid="openapi-link" className="font-mono text-[12.5px] text-accent hover:underline">
              /api/v1/openapi.json
            </a>{" "}
            (OpenAPI 3.1).
          </p>
        </div>

        <section id="calling" className="scroll-mt-20 rounded-xl border border-line bg-surface px-5 py-4 shadow-xs">
          <h2 className="text-base font-semibold tracking-tight">Calling a tool</h2>
          <ul className="mt-2 list-disc space-y-1.5 pl-5 text-[13px] text-fg/90">
            <li>
              <code className="font-mono text-[12.5px]">POST {base}/api/v1/tools/&#123;tool&#125;/invoke</code> with{" "}
              <code className="font-mono text-[12.5px]">Authorization: Bearer $IDEMGATE_TOKEN</code> and the arguments as a JSON object.
              The token&apos;s scope is the namespace of your keys: the same key under two tokens is two actions.
            </li>
            <li>
              Write tools take an <code className="font-mono text-[12.5px]">Idempotency-Key</code>: 1–255 printable ASCII characters
              naming one logical action. Send the same key on every retry of that action and a new key for a new action.
            </li>
            <li>
              The first call runs the tool; a duplicate gets the stored status and body back with{" "}
              <code className="font-mono text-[12.5px]">Idempotent-Replayed: true</code>, and the side effect does not run again.
              A duplicate that arrives while the first is still running gets 409 with <code className="font-mono text-[12.5px]">Retry-After</code>.
            </li>
            <li>
              Optional <code className="font-mono text-[12.5px]">Idemgate-Session</code> names your run or conversation; it is recorded
              with every execution and suppression.
            </li>
          </ul>
        </section>

        {operations.map((op) => (
          <Operation key={op.tool} op={op} base={base} />
        ))}

        <section id="errors" className="scroll-mt-20">
          <h2 className="text-base font-semibold tracking-tight">Errors</h2>
          <p className="mt-1 max-w-3xl text-[13px] text-muted">
            Every error is RFC 9457 <code className="font-mono text-[12.5px]">application/problem+json</code> with{" "}
            <code className="font-mono text-[12.5px]">type</code>, <code className="font-mono text-[12.5px]">title</code>,{" "}
            <code className="font-mono text-[12.5px]">status</code> and <code className="font-mono text-[12.5px]">detail</code>. The type
            is a link to its explanation. A tool&apos;s own final errors (e.g. 402 card declined) are stored and replayed like results.
          </p>
          <div className="mt-3 overflow-x-auto rounded-xl border border-line bg-surface shadow-xs">
            <table data-testid="problem-types" className="w-full text-[13px]">
              <TableHead columns={[{ label: "Status" }, { label: "Type" }, { label: "Title" }, { label: "Send again?" }]} />
              <tbody className="divide-y divide-line">
                {problems.map((p) => (
                  <tr key={p.code}>
                    <td className="px-5 py-2 font-mono text-[12.5px] tabular-nums">{p.status}</td>
                    <td className="px-3 py-2">
                      <Link href={`/problems/${p.code}`} className="font-mono text-[12.5px] text-accent hover:underline">
                        /problems/{p.code}
                      </Link>
                    </td>
                    <td className="px-3 py-2">{p.title}</td>
                    <td className="px-5 py-2 text-muted">{RETRY_LABELS[p.retry]}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </section>
      </div>
    </div>
  );
}

function Operation({ op, base }: { op: OperationReference; base: string }) {
  const curl = curlExample(base, op);
  const write = op.kind === "write";
  return (
    <section id={op.tool} data-testid={`api-tool-${op.tool}`} className="scroll-mt-20 overflow-hidden rounded-xl border border-line bg-surface shadow-xs">
      <header className="border-b border-line px-5 py-4">
        <div className="flex flex-wrap items-center gap-2">
          <h2 className="font-mono text-base font-semibold tracking-tight">{op.tool}</h2>
          <KindBadge kind={op.kind} />
          {write && <KeyBadge mode={op.idempotencyKey} />}
          <Link href={`/tools/${encodeURIComponent(op.tool)}`} className="ml-auto text-xs text-accent hover:underline">
            Tool page →
          </Link>
        </div>
        <p className="mt-2 flex flex-wrap items-center gap-2">
          <span className="rounded bg-accent-soft px-1.5 py-0.5 font-mono text-[11px] font-semibold text-accent">{op.method}</span>
          <code className="font-mono text-[12.5px]">{op.path}</code>
        </p>
        <p className="mt-2 text-[13px] text-fg/90">{op.summary}</p>
        {write && (
          <p className="mt-1 text-xs text-muted">
            Results replayed for {formatDuration(op.policy.ttlMs)} · lease {formatDuration(op.policy.leaseMs)} · when stuck:{" "}
            {op.policy.stuckPolicy}
            {op.policy.fallbackTtlMs !== null && ` · keyless calls deduplicated by their arguments for ${formatDuration(op.policy.fallbackTtlMs)}`}
          </p>
        )}
      </header>

      <div className="space-y-5 px-5 py-4">
        <SubTable title="Headers" columns={["Header", "Required", "Description"]}>
          {op.headers.map((h) => (
            <tr key={h.name}>
              <td className="py-1.5 pr-4 font-mono text-[12.5px] whitespace-nowrap">{h.name}</td>
              <td className="py-1.5 pr-4 whitespace-nowrap" data-testid={h.name === "Idempotency-Key" ? "key-requirement" : undefined}>
                {h.required === "unused" ? <span className="text-faint">unused</span> : h.required ? <span className="font-medium">required</span> : <span className="text-muted">optional</span>}
              </td>
              <td className="py-1.5 text-muted">{h.description}</td>
            </tr>
          ))}
        </SubTable>

        <SubTable title="Arguments" columns={["Name", "Type", "Required", "Description and constraints"]} empty={op.arguments.length === 0 ? "No arguments: send {} or no body." : undefined}>
          {op.arguments.map((a) => (
            <tr key={a.name} data-testid="argument-row">
              <td className="py-1.5 pr-4 font-mono text-[12.5px] whitespace-nowrap" style={{ paddingLeft: `${a.depth * 1}rem` }}>
                {a.depth > 0 && <span aria-hidden="true" className="text-faint">↳ </span>}
                {a.name}
              </td>
              <td className="py-1.5 pr-4 font-mono text-[12px] text-muted">{a.type}</td>
              <td className="py-1.5 pr-4">{a.required ? <span className="font-medium">required</span> : <span className="text-muted">optional</span>}</td>
              <td className="py-1.5 text-muted">
                {a.description && <span className="text-fg/90">{a.description}</span>}
                {a.constraints.length > 0 && (
                  <span className={clsx("font-mono text-[11.5px]", a.description && "block")}>{a.constraints.join(" · ")}</span>
                )}
              </td>
            </tr>
          ))}
        </SubTable>

        <div>
          <div className="mb-1.5 flex items-center justify-between">
            <h3 className="text-xs font-medium tracking-wide text-muted uppercase">Example</h3>
            <CopyButton text={curl} />
          </div>
          <pre tabIndex={0} data-testid="curl-example" className="overflow-x-auto rounded-lg border border-line bg-surface-2 px-3 py-2.5 font-mono text-[12px] leading-5">
            {curl}
          </pre>
          {op.exampleResult !== null && (
            <details className="mt-2 text-[13px]">
              <summary className="cursor-pointer text-xs text-muted hover:text-fg">Example result (200)</summary>
              <pre tabIndex={0} className="mt-1.5 overflow-x-auto rounded-lg border border-line bg-surface-2 px-3 py-2.5 font-mono text-[12px] leading-5">
                {JSON.stringify(op.exampleResult, null, 2)}
              </pre>
            </details>
          )}
        </div>

        <SubTable title="Responses" columns={["Status", "Meaning", "Content"]}>
          {op.responses.map((r) => (
            <tr key={r.status}>
              <td className="py-1.5 pr-4 font-mono text-[12.5px] whitespace-nowrap">
                <span className={clsx(r.status.startsWith("2") ? "text-ok" : r.status === "default" ? "text-muted" : r.status.startsWith("5") ? "text-bad" : "text-warn")}>
                  {r.status}
                </span>
              </td>
              <td className="py-1.5 pr-4 text-fg/90">
                {r.description}
                {r.headers.length > 0 && <span className="block font-mono text-[11.5px] text-muted">headers: {r.headers.join(", ")}</span>}
              </td>
              <td className="py-1.5 font-mono text-[11.5px] text-muted">{r.contentTypes.join(", ")}</td>
            </tr>
          ))}
        </SubTable>
      </div>
    </section>
  );
}

function SubTable({ title, columns, children, empty }: { title: string; columns: string[]; children: React.ReactNode; empty?: string }) {
  return (
    <div>
      <h3 className="mb-1.5 text-xs font-medium tracking-wide text-muted uppercase">{title}</h3>
      {empty ? (
        <p className="text-[13px] text-muted">{empty}</p>
      ) : (
        <div className="overflow-x-auto">
          <table className="w-full text-left text-[13px]">
            <thead>
              <tr className="border-b border-line text-xs text-faint">
                {columns.map((c) => (
                  <th key={c} scope="col" className="py-1.5 pr-4 font-medium">
                    {c}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody className="divide-y divide-line align-top">{children}</tbody>
          </table>
        </div>
      )}
    </div>
  );
}
