"use client";

import clsx from "clsx";
import Link from "next/link";
import { useRouter } from "next/navigation";
import { useId, useState } from "react";
import { ProblemAlert } from "@/components/ui/problem-alert";
import { buttonClass, inputClass } from "@/components/ui/styles";
import { keyHref } from "@/lib/console/api";
import { useInvokeTool } from "@/lib/console/queries/tools";
import type { GatewayExchange } from "@/lib/gateway/console-invoke";

export interface InvokeFormTool {
  name: string;
  kind: "read" | "write";
  idempotencyKey: "required" | "optional" | "unused";
  fallbackTtlMs: number | null;
}

/** A v4 UUID; crypto.randomUUID needs a secure context, which a console on plain HTTP is not. */
function newKey(): string {
  if (typeof crypto.randomUUID === "function") {
    try {
      return crypto.randomUUID();
    } catch {
      // insecure context
    }
  }
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

interface Attempt {
  n: number;
  key: string | null;
  scope: string;
  exchange: GatewayExchange;
}

function prettyBody(body: string): string {
  try {
    return JSON.stringify(JSON.parse(body), null, 2);
  } catch {
    return body;
  }
}

function statusTone(status: number): string {
  if (status < 300) return "bg-ok-soft text-ok";
  if (status < 500) return "bg-warn-soft text-warn";
  return "bg-bad-soft text-bad";
}

/**
 * Runs the tool through POST /api/v1/console/invoke, which uses the gateway's own path, and shows
 * the answer as a caller would get it: status, headers, body. The key stays put between submits,
 * so a second submit shows the replay.
 */
export function InvokeForm({
  tool,
  exampleArguments,
  initialKey,
  canInvoke,
  role,
}: {
  tool: InvokeFormTool;
  exampleArguments: string;
  initialKey: string;
  canInvoke: boolean;
  role: string;
}) {
  const id = useId();
  const router = useRouter();
  const [args, setArgs] = useState(exampleArguments);
  const [scope, setScope] = useState("demo");
  const [key, setKey] = useState(initialKey);
  const [session, setSession] = useState("");
  const [attempts, setAttempts] = useState<Attempt[]>([]);
  const usesKey = tool.idempotencyKey !== "unused";

  const argsError = (() => {
    if (args.trim() === "") return null;
    try {
      JSON.parse(args);
      return null;
    } catch (err) {
      return (err as Error).message;
    }
  })();

  const invoke = useInvokeTool(tool.name, (exchange, input) => {
    setAttempts((prev) => [{ n: (prev[0]?.n ?? 0) + 1, key: input.key, scope: input.scope, exchange }, ...prev].slice(0, 6));
    // the page's counts, charts and suppression log now include this call; the form keeps its state
    router.refresh();
  });

  const latest = attempts[0];
  const earlier = attempts.slice(1);

  return (
    <div className="grid gap-0 lg:grid-cols-2">
      <form
        data-testid="invoke-form"
        className="space-y-4 border-line p-5 lg:border-r"
        onSubmit={(e) => {
          e.preventDefault();
          invoke.mutate({ key: usesKey && key.trim() !== "" ? key : null, scope: scope.trim(), session: session.trim() || null, arguments: args });
        }}
      >
        {!canInvoke && (
          <p data-testid="invoke-disabled" className="rounded-md border border-line bg-surface-2 px-3 py-2 text-[13px] text-muted">
            Your role (<span className="font-medium text-fg">{role}</span>) may look but not invoke: running a tool has real side
            effects. An operator account can invoke it here.
          </p>
        )}
        <fieldset disabled={!canInvoke || invoke.isPending} className="space-y-4">
          <div className="space-y-1.5">
            <div className="flex items-baseline justify-between">
              <label htmlFor={`${id}-args`} className="text-[13px] font-medium">
                Arguments <span className="font-normal text-muted">JSON</span>
              </label>
              <button type="button" className={buttonClass("ghost", "sm")} onClick={() => setArgs(exampleArguments)}>
                Reset example
              </button>
            </div>
            <textarea
              id={`${id}-args`}
              data-testid="invoke-arguments"
              value={args}
              onChange={(e) => setArgs(e.target.value)}
              spellCheck={false}
              rows={Math.min(12, Math.max(5, args.split("\n").length + 1))}
              className={clsx(inputClass, "w-full resize-y font-mono text-[12.5px] leading-5")}
              aria-invalid={argsError !== null}
              aria-describedby={argsError ? `${id}-args-error` : undefined}
            />
            {argsError && (
              <p id={`${id}-args-error`} className="text-xs text-warn">
                Not valid JSON ({argsError}); the gateway will answer 400 invalid_json.
              </p>
            )}
          </div>

          <div className="grid gap-4 sm:grid-cols-[10rem_1fr]">
            <div className="space-y-1.5">
              <label htmlFor={`${id}-scope`} className="block text-[13px] font-medium">
                Scope
              </label>
              <input
                id={`${id}-scope`}
                data-testid="invoke-scope"
                value={scope}
                onChange={(e) => setScope(e.target.value)}
                required
                className={clsx(inputClass, "w-full font-mono text-[12.5px]")}
              />
            </div>
            {usesKey ? (
              <div className="space-y-1.5">
                <label htmlFor={`${id}-key`} className="block text-[13px] font-medium">
                  Idempotency-Key{" "}
                  <span className="font-normal text-muted">
                    {tool.idempotencyKey === "optional" ? "optional: without it, identical calls are deduplicated by their arguments" : "required"}
                  </span>
                </label>
                <div className="flex gap-2">
                  <input
                    id={`${id}-key`}
                    data-testid="invoke-key"
                    value={key}
                    onChange={(e) => setKey(e.target.value)}
                    required={tool.idempotencyKey === "required"}
                    placeholder={tool.idempotencyKey === "optional" ? "none: fallback dedupe" : undefined}
                    className={clsx(inputClass, "min-w-0 flex-1 font-mono text-[12.5px]")}
                  />
                  <button type="button" data-testid="invoke-new-key" className={buttonClass("secondary")} onClick={() => setKey(newKey())}>
                    New key
                  </button>
                </div>
              </div>
            ) : (
              <p className="self-end pb-1.5 text-[13px] text-muted">Read tools are never gated: no Idempotency-Key is sent.</p>
            )}
          </div>

          <div className="space-y-1.5">
            <label htmlFor={`${id}-session`} className="block text-[13px] font-medium">
              Idemgate-Session <span className="font-normal text-muted">optional: the run or conversation, recorded with the call</span>
            </label>
            <input
              id={`${id}-session`}
              data-testid="invoke-session"
              value={session}
              onChange={(e) => setSession(e.target.value)}
              placeholder="e.g. agent-run-42"
              className={clsx(inputClass, "w-full font-mono text-[12.5px]")}
            />
          </div>

          <div className="flex flex-wrap items-center gap-3">
            <button type="submit" data-testid="invoke-submit" className={buttonClass("primary")}>
              {invoke.isPending ? "Invoking…" : `Invoke ${tool.name}`}
            </button>
            {usesKey && latest && latest.key === key && (
              <span className="text-xs text-muted">Submit again with this key to see the replay; New key for a new action.</span>
            )}
          </div>
        </fieldset>
      </form>

      <section aria-label="Gateway response" data-testid="invoke-response-panel" className="min-w-0 border-t border-line p-5 lg:border-t-0">
        {invoke.isError ? (
          <ProblemAlert error={invoke.error} testId="invoke-error" />
        ) : !latest ? (
          <div className="flex h-full min-h-40 items-center justify-center rounded-lg border border-dashed border-line text-center text-[13px] text-muted">
            <p className="max-w-xs">
              The gateway&apos;s answer shows here exactly as an API caller gets it: status, headers and body.
            </p>
          </div>
        ) : (
          <Response attempt={latest} />
        )}
        {earlier.length > 0 && (
          <div className="mt-4">
            <h4 className="mb-1.5 text-xs font-medium tracking-wide text-muted uppercase">Earlier attempts</h4>
            <ul data-testid="invoke-history" className="divide-y divide-line rounded-lg border border-line text-[12.5px]">
              {earlier.map((a) => (
                <li key={a.n} className="flex items-center gap-3 px-3 py-1.5">
                  <span className="w-6 text-faint tabular-nums">#{a.n}</span>
                  <span className={clsx("rounded px-1.5 py-0.5 font-mono text-[11px] font-medium", statusTone(a.exchange.response.status))}>
                    {a.exchange.response.status}
                  </span>
                  <span className="min-w-0 flex-1 truncate font-mono text-muted">{a.key ?? "(no key)"}</span>
                  {a.exchange.response.headers["Idempotent-Replayed"] === "true" && <span className="text-xs text-ok">replayed</span>}
                </li>
              ))}
            </ul>
          </div>
        )}
      </section>
    </div>
  );
}

function Response({ attempt }: { attempt: Attempt }) {
  const { response } = attempt.exchange;
  const replayed = response.headers["Idempotent-Replayed"] === "true";
  const effectiveKey = response.headers["Idempotency-Key"] ?? null;
  return (
    <div data-testid="invoke-response" data-status={response.status} data-replayed={replayed} className="space-y-3">
      <div className="flex flex-wrap items-center gap-2">
        <span data-testid="invoke-status" className={clsx("rounded-md px-2 py-0.5 font-mono text-[12.5px] font-semibold", statusTone(response.status))}>
          HTTP {response.status}
        </span>
        <span className="text-xs text-muted">attempt #{attempt.n}</span>
        {replayed ? (
          <span className="rounded-full bg-ok-soft px-2 py-0.5 text-xs font-medium text-ok">replayed: the stored result, the tool did not run again</span>
        ) : response.headers["Idemgate-Execution-Id"] ? (
          <span className="rounded-full bg-accent-soft px-2 py-0.5 text-xs font-medium text-accent">executed</span>
        ) : null}
        {effectiveKey && (
          <Link href={keyHref(attempt.scope, effectiveKey)} className="ml-auto text-xs text-accent hover:underline">
            Key detail →
          </Link>
        )}
      </div>
      <pre tabIndex={0} data-testid="invoke-headers" className="overflow-x-auto rounded-lg border border-line bg-surface-2 px-3 py-2 font-mono text-[12px] leading-5">
        {Object.entries(response.headers).map(([name, value]) => (
          <span key={name} className="block">
            <span className="text-muted">{name}:</span> <span className={name === "Idempotent-Replayed" ? "font-semibold text-ok" : ""}>{value}</span>
          </span>
        ))}
      </pre>
      <pre tabIndex={0} data-testid="invoke-body" className="max-h-80 overflow-auto rounded-lg border border-line bg-surface-2 px-3 py-2 font-mono text-[12px] leading-5">
        {prettyBody(response.body)}
      </pre>
    </div>
  );
}
