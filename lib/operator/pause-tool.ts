import { recordOperatorAction, requireReason } from "@/lib/audit/operator-actions";
import { readPausedTool } from "@/lib/audit/paused-tools-table";
import { badRequest } from "@/lib/http/problem";
import { InvalidStateError } from "@/lib/idempotency/errors";
import { pauseOf, type ToolPause } from "@/lib/idempotency/paused-tools";
import { webhookEndpoints } from "@/lib/notifications/endpoints";
import { eventForToolPause } from "@/lib/notifications/events";
import { enqueueEvents } from "@/lib/notifications/outbox";
import type { Runtime } from "@/lib/server/runtime";
import type { ToolListing } from "@/lib/tools/api-schemas";
import type { ToolDefinition } from "@/lib/tools/define-tool";

type PauseRuntime = Pick<Runtime, "db" | "engine" | "registry">;

export interface ToolPauseView {
  tool: string;
  paused: boolean;
  reason: string | null;
  actor: string | null;
  pausedAt: string | null;
  /** operator: paused from the console, the API or the command line; config: `paused: true` in the file */
  source: Exclude<ToolPause["source"], "unread"> | null;
}

export function pauseView(tool: string, pause: ToolPause | null): ToolPauseView {
  return {
    tool,
    paused: pause !== null,
    reason: pause?.reason ?? null,
    actor: pause?.actor ?? null,
    pausedAt: pause?.pausedAtMs != null ? new Date(pause.pausedAtMs).toISOString() : null,
    source: pause && pause.source !== "unread" ? pause.source : null,
  };
}

/** A write tool this server serves; 404 for an unknown one, 400 for a read (reads are never refused). */
function pausableTool(runtime: PauseRuntime, name: string): ToolDefinition {
  const tool = runtime.registry.get(name);
  if (tool.kind !== "write") throw badRequest("invalid_request", `${name} is a read: reads are never reserved or refused, so there is nothing to pause`);
  return tool;
}

/**
 * A tool's pause as this process last read it (at most PAUSE_REFRESH_MS old), for listings: a tool
 * whose pause is not known yet (the paused tools are unread) is not listed as paused; its calls are
 * refused as unavailable until it is.
 */
function listedPause(runtime: Pick<Runtime, "engine">, tool: ToolDefinition): ToolPauseView | null {
  const pause = tool.kind === "write" ? pauseOf(tool, runtime.engine.pausedTools) : null;
  return pause && pause.source !== "unread" ? pauseView(tool.name, pause) : null;
}

/** Every paused tool this process knows, declared in the file or paused by an operator. */
export function pausedToolsNow(runtime: Pick<Runtime, "engine" | "registry">): ToolPauseView[] {
  return runtime.registry
    .list()
    .map((tool) => listedPause(runtime, tool))
    .filter((view): view is ToolPauseView => view !== null);
}

/**
 * GET /api/v1/tools: every tool as the registry describes it, with its pause (listedPause), so an
 * agent can tell a paused tool before calling it. Who paused it is for the console and the operator
 * log, not for API tokens.
 */
export function toolListing(runtime: Pick<Runtime, "engine" | "registry">): ToolListing {
  return {
    tools: runtime.registry.list().map((tool) => {
      const view = listedPause(runtime, tool);
      return {
        ...runtime.registry.describe(tool),
        paused: view && view.source ? { reason: view.reason ?? "", pausedAt: view.pausedAt, source: view.source } : null,
      };
    }),
  };
}

/** A tool's pause as the database says now (not this process's last read of it). */
export async function toolPause(runtime: PauseRuntime, name: string): Promise<ToolPauseView> {
  const tool = runtime.registry.get(name);
  const declared = tool.kind === "write" ? pauseOf(tool, null) : null;
  return pauseView(name, declared ?? (await readPausedTool(runtime.db.prisma, name)));
}

/**
 * An operator pauses a write tool: from now on its new first executions are refused (503
 * tool_paused) by every server process within a second, before anything is reserved. The pause,
 * its audit-trail row and its webhook events are written in one transaction; pausing a paused tool
 * again replaces the reason (and is recorded too).
 */
export async function pauseTool(runtime: PauseRuntime, input: { tool: string; actor: string; reason: unknown }): Promise<ToolPauseView> {
  const tool = pausableTool(runtime, input.tool);
  const reason = requireReason(input.reason);
  const at = new Date();
  await runtime.db.prisma.$transaction(async (tx) => {
    const before = await tx.pausedTool.findUnique({ where: { tool: tool.name } });
    await tx.pausedTool.upsert({
      where: { tool: tool.name },
      create: { tool: tool.name, reason, actor: input.actor, pausedAt: at },
      update: { reason, actor: input.actor, pausedAt: at },
    });
    const actionId = await recordOperatorAction(tx, {
      actor: input.actor,
      action: "tool_pause",
      reason,
      before: { tool: tool.name, paused: before !== null, ...(before ? { reason: before.reason } : {}) },
      after: { tool: tool.name, paused: true },
    });
    await enqueueEvents(tx, webhookEndpoints(), [eventForToolPause("tool.paused", { actionId, tool: tool.name, actor: input.actor, reason, atMs: at.getTime() })]);
  });
  // this process refuses at once; the others at their next read
  await runtime.engine.pausedTools?.refresh().catch(() => {});
  return pauseView(tool.name, { tool: tool.name, reason, actor: input.actor, pausedAtMs: at.getTime(), source: "operator" });
}

/** An operator resumes a paused tool: its new calls run again. Refused (409) for a tool that is not paused, or is paused by the configuration file. */
export async function resumeTool(runtime: PauseRuntime, input: { tool: string; actor: string; reason: unknown }): Promise<ToolPauseView> {
  const tool = pausableTool(runtime, input.tool);
  const reason = requireReason(input.reason);
  if (tool.paused) throw new InvalidStateError(`${tool.name} is declared paused in the configuration file: remove \`paused: true\` there and reload it to resume the tool`, null);
  const at = new Date();
  await runtime.db.prisma.$transaction(async (tx) => {
    const before = await tx.pausedTool.findUnique({ where: { tool: tool.name } });
    if (!before) throw new InvalidStateError(`${tool.name} is not paused`, null);
    // a resume at the same moment may have taken the row since it was read: that one resumed it
    const { count } = await tx.pausedTool.deleteMany({ where: { tool: tool.name } });
    if (count === 0) throw new InvalidStateError(`${tool.name} is not paused`, null);
    const actionId = await recordOperatorAction(tx, {
      actor: input.actor,
      action: "tool_resume",
      reason,
      before: { tool: tool.name, paused: true, reason: before.reason, pausedBy: before.actor, pausedAt: before.pausedAt.toISOString() },
      after: { tool: tool.name, paused: false },
    });
    await enqueueEvents(tx, webhookEndpoints(), [eventForToolPause("tool.resumed", { actionId, tool: tool.name, actor: input.actor, reason, atMs: at.getTime() })]);
  });
  await runtime.engine.pausedTools?.refresh().catch(() => {});
  return pauseView(tool.name, null);
}
