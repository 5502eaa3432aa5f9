import { Command } from "commander";
import { requireReason } from "@/lib/audit/operator-actions";
import { pauseTool, resumeTool, type ToolPauseView } from "@/lib/operator/pause-tool";
import { cliActor } from "../actor";
import { CliError } from "../errors";
import { withDatabaseOrServer } from "../through-server";

// Pause and resume a write tool. Each command opens the database itself, or goes through the
// running server that holds the embedded one (cli/through-server.ts), with the same audit rows and
// webhook events. Opened directly, the command knows the built-in tools and IDEMGATE_UPSTREAM_TOOLS;
// a tool of a configuration file or an MCP server is paused through the server's API or console.

function said(view: ToolPauseView): string {
  return view.paused
    ? `Paused ${view.tool}: every server refuses its new calls within a second (503 tool_paused). Reason: ${view.reason}`
    : `Resumed ${view.tool}: its new calls run again.`;
}

export function toolCommand(): Command {
  const tool = new Command("tool").description("pause and resume write tools");

  for (const verb of ["pause", "resume"] as const) {
    tool
      .command(verb)
      .description(
        verb === "pause"
          ? "pause a write tool: its new first executions are refused (503 tool_paused) by every server process within a second; replays, completions and reads go on. Recorded in the operator audit trail and sent to webhooks"
          : "resume a paused tool: its new calls run again. Recorded in the operator audit trail and sent to webhooks",
      )
      .argument("<tool>", "the tool's name, e.g. payments.charge")
      .requiredOption("--reason <text>", "why (kept in the audit trail, shown to callers that are refused)")
      .option("--json", "print { tool, paused, reason, actor, pausedAt, source } as JSON")
      .action(async (name: string, opts: { reason: string; json?: boolean }) => {
        const reason = requireReason(opts.reason);
        const act = verb === "pause" ? pauseTool : resumeTool;
        const view = await withDatabaseOrServer(
          (rt) => act(rt, { tool: name, actor: cliActor(), reason }),
          async (server) => {
            const answer = await server.request<ToolPauseView & { detail?: string }>("POST", `/api/v1/tools/${encodeURIComponent(name)}/${verb}`, { reason });
            if (answer.status === 404) throw new CliError(answer.body.detail ?? `no tool named ${name}`);
            return answer.body;
          },
        );
        console.log(opts.json ? JSON.stringify(view) : said(view));
      });
  }
  return tool;
}
