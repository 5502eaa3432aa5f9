import { Command } from "commander";
import { reconcileRuntime } from "@/lib/anomalies/background";
import { formatTable } from "../format-table";
import { withRuntime } from "../with-runtime";

export function reconcileCommand(): Command {
  return new Command("reconcile")
    .description("one reconciler pass: flag orphaned side effects and stale suppressions, and print them")
    .option("--json", "print the report as JSON")
    .action(async (opts: { json?: boolean }) => {
      const report = await withRuntime((rt) => reconcileRuntime(rt));
      if (opts.json) {
        console.log(JSON.stringify(report, null, 2));
        return;
      }
      const { executions, suppressions, effects } = report.examined;
      console.log(`Examined ${executions} executions, ${suppressions} replays and ${effects} side effects; filled in ${report.backfilled} lost outcomes.`);
      if (report.flagged.length === 0) {
        console.log("Nothing flagged.");
        return;
      }
      console.log(`Flagged ${report.flagged.length} (${report.created} new):`);
      console.log(
        formatTable(
          ["TYPE", "TOOL", "SCOPE", "KEY", "SUMMARY"],
          report.flagged.map((a) => [a.type, a.tool, a.scope ?? "-", a.key ?? "-", a.summary]),
        ),
      );
    });
}
