import { Command } from "commander";
import { setWebhookEndpoints } from "@/lib/notifications/endpoints";
import { reconcileRuntime } from "@/lib/process/background";
import { configFileWebhooks } from "@/lib/process/config-file-webhooks";
import { describeConfigError } from "@/lib/process/served-tools";
import { CliError } from "../errors";
import { formatTable } from "../format-table";
import { withRuntime } from "../with-runtime";

export function reconcileCommand(): Command {
  return new Command("reconcile")
    .description("one reconciler pass: flag orphaned side effects and stale suppressions, ask the tools that can tell about unknown and stuck keys, and print what it found")
    .option("--json", "print the report as JSON")
    .action(async (opts: { json?: boolean }) => {
      // what a pass opens is queued for the configuration file's webhook endpoints, as the server's
      // passes are (in the transaction that opens it); the server's dispatcher sends them
      const endpoints = webhooksOrRefuse();
      setWebhookEndpoints(endpoints);
      const report = await withRuntime((rt) => reconcileRuntime(rt));
      if (opts.json) {
        console.log(JSON.stringify(report, null, 2));
        return;
      }
      const { executions, suppressions, effects } = report.examined;
      console.log(`Examined ${executions} executions, ${suppressions} replays and ${effects} side effects; filled in ${report.backfilled} lost outcomes; held ${report.restored} keys again whose record the key store had lost.`);
      if (report.finished > 0) console.log(`Carried out ${report.finished} decisions whose process stopped before recording them.`);
      if (report.settled > 0) console.log(`Closed ${report.settled} anomalies whose key needs nobody any more.`);
      if (report.probed.length > 0) {
        const n = (action: string) => report.probed.filter((p) => p.action === action).length;
        console.log(`Asked the tools about ${report.probed.length} unknown or stuck keys: ${n("resolved")} resolved, ${n("released")} released, ${n("none")} left as they are.`);
      }
      if (report.flagged.length === 0) {
        console.log("Nothing flagged.");
        return;
      }
      console.log(`Flagged ${report.flagged.length} (${report.created} new):`);
      if (report.created > 0 && endpoints.length > 0) {
        console.log(`Queued their webhook events for ${endpoints.map((e) => e.name).join(", ")}; a running server sends them.`);
      }
      console.log(
        formatTable(
          ["TYPE", "TOOL", "SCOPE", "KEY", "SUMMARY"],
          report.flagged.map((a) => [a.type, a.tool, a.scope ?? "-", a.key ?? "-", a.summary]),
        ),
      );
    });
}

/** A configuration file with an error queues nothing and says why, as the server refuses to start with it. */
function webhooksOrRefuse() {
  try {
    return configFileWebhooks();
  } catch (err) {
    throw new CliError(`the configuration file was refused, so this pass would queue no webhook events:\n${describeConfigError(err)}`);
  }
}
