import { randomUUID } from "node:crypto";
import type { ExecutionOutcome } from "../audit-port";
import { UnavailableError } from "../errors";
import { fingerprint as fingerprintOf } from "../fingerprint";
import { keptArguments } from "../kept-arguments";
import { passThroughKey } from "../key-rules";
import { exceptionNote, noteWithDetail } from "../outcome-note";
import { isFinalToolError, isNotRunError, isOutcomeUnknown, type RunTool, type ToolPolicy, type ToolResult } from "../tool";
import { intentArguments, serialize, type CallTrace } from "./call";
import type { EngineCore } from "./core";
import type { InvokeRequest, InvokeResult } from "./types";

/** A read: never gated, run as it comes (an audited one recorded as it runs: passThrough). */
export async function read(core: EngineCore, tool: ToolPolicy, run: RunTool, request: InvokeRequest, trace: CallTrace): Promise<InvokeResult> {
  if (tool.audited) return passThrough(core, tool, run, request, trace);
  const result = await run(request.args, { scope: request.scope, key: null, session: request.session ?? null, executionId: null });
  trace.result = "read";
  return { kind: "read", status: result.status ?? 200, body: serialize(result.body) };
}

/**
 * A read the audit log records: a tool that is idempotent by its own word (an MCP server's
 * `idempotentHint`), passed through without a key. Nothing is reserved and nothing replayed; the
 * call is an execution under a key of its own (`passthrough:<execution id>`, never a caller's),
 * with its caller, session and transport. Its intent is written before it runs, as a write's is
 * (no intent, no call), and its outcome as a write's would be, but it holds nothing: the caller
 * may call again at any time. Errors reach the caller as a read's do.
 */
async function passThrough(core: EngineCore, tool: ToolPolicy, run: RunTool, request: InvokeRequest, trace: CallTrace): Promise<InvokeResult> {
  const executionId = randomUUID();
  const startedMs = core.now();
  const t0 = performance.now();
  try {
    await core.audit.intent({
      id: executionId,
      scope: request.scope,
      key: passThroughKey(executionId),
      tool: tool.name,
      fingerprint: fingerprintOf(tool.name, request.args),
      token: 0,
      session: request.session ?? null,
      caller: request.caller ?? null,
      transport: request.transport ?? "http",
      fallback: false,
      startedAt: new Date(startedMs),
      leaseUntil: new Date(startedMs + tool.leaseMs),
      ...intentArguments(keptArguments(request.args, tool.argumentRetention)),
    });
  } catch (err) {
    trace.auditMs += performance.now() - t0;
    trace.result = "unavailable";
    throw new UnavailableError("audit_log", err);
  }
  trace.auditMs += performance.now() - t0;
  const started = performance.now();
  // a read holds no key: its outcome is recorded without a result to replay
  const ended = (outcome: ExecutionOutcome, resultStatus: number | null, error: string | null) => {
    core.audit.outcome({
      id: executionId,
      outcome,
      finishedAt: new Date(core.now()),
      durationMs: Math.round(performance.now() - started),
      resultStatus,
      resultBody: null,
      resultFinal: null,
      expiresAt: null,
      error,
    });
    trace.result = "read";
  };
  let result: ToolResult;
  try {
    result = await run(request.args, { scope: request.scope, key: null, session: request.session ?? null, executionId });
  } catch (err) {
    if (isFinalToolError(err)) ended("final_error", err.status, null);
    else if (isNotRunError(err)) ended("failed", null, err.message);
    else ended("unknown", null, isOutcomeUnknown(err) ? noteWithDetail(err.note, err.detail) : exceptionNote(err instanceof Error ? err.message : String(err)));
    throw err;
  }
  const status = result.status ?? 200;
  ended(status >= 400 ? "final_error" : "succeeded", status, null);
  return { kind: "read", status, body: serialize(result.body), executionId };
}
