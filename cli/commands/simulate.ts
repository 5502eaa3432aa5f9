import { Command, InvalidArgumentError } from "commander";
import { flaggedFreshKeyDuplicates } from "@/lib/anomalies/anomalies";
import { reconcileRuntime } from "@/lib/process/background";
import { formatSummary, runSimulation, SIMULATION_DEFAULTS, SimulationError, SimulationTargetError, type FreshKeyDuplicateSent } from "@/cli/simulate";
import { CliError } from "../errors";
import { withRuntime } from "../with-runtime";

/** "30s", "2m", "500ms", "1h" or plain seconds. */
export function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (!match) throw new InvalidArgumentError(`"${text}" is not a duration (e.g. 30s, 2m, 500ms)`);
  const unit = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 }[(match[2] ?? "s") as "ms" | "s" | "m" | "h"];
  const ms = Math.round(Number(match[1]) * unit);
  if (ms <= 0) throw new InvalidArgumentError("the duration must be more than 0");
  return ms;
}

function positiveInt(text: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`"${text}" is not a positive whole number`);
  return n;
}

function seedValue(text: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 0 || n > 0xffffffff) throw new InvalidArgumentError(`"${text}" is not a seed (a whole number, 0–4294967295)`);
  return n;
}

interface SimulateFlags {
  url: string;
  token?: string;
  agents: number;
  duration: number;
  seed?: number;
  genuineRepeats?: boolean;
  faults?: boolean;
  freshKeys: boolean;
  modelKeys?: boolean;
  reconcile?: boolean;
  maxRequests: number;
  json?: boolean;
}

/**
 * After a run: one reconciler pass over the server's database (as `idemgate reconcile` does), then
 * which of the fresh-key duplicates that ran it flagged. Needs the database: PostgreSQL, or the
 * embedded one only while no server holds it.
 */
async function reconcileAndCheck(ran: readonly FreshKeyDuplicateSent[], since: Date): Promise<Set<string>> {
  // the server writes outcomes in batches: let the last ones land
  await new Promise((r) => setTimeout(r, 1_000));
  return withRuntime(async (runtime) => {
    await reconcileRuntime(runtime);
    return flaggedFreshKeyDuplicates(runtime.db.prisma, { tools: ran.map((d) => d.tool), keys: ran.map((d) => d.key), since });
  });
}

export function simulateCommand(): Command {
  return new Command("simulate")
    .description("agent-like traffic through a running gateway: client-timeout retries, re-emitted calls, fresh keys by mistake, unknown outcomes, crashes")
    .option("--url <url>", "the gateway (loopback, or $IDEMGATE_URL)", "http://127.0.0.1:3000")
    .option("--token <token>", "an API token (default: $IDEMGATE_TOKEN)")
    .option("--agents <n>", "concurrent callers", positiveInt, SIMULATION_DEFAULTS.agents)
    .option("--duration <time>", "how long to send (e.g. 30s, 2m)", parseDuration, SIMULATION_DEFAULTS.durationMs)
    .option("--seed <n>", "plan the same traffic as an earlier run", seedValue)
    .option("--genuine-repeats", "also repeat identical actions genuinely, after long gaps (stale-suppression candidates)")
    .option("--faults", "also declines, tool errors, unknown outcomes and crashes after the side effect (stuck keys)")
    .option("--no-fresh-keys", "never re-send an action under a fresh key (by default some are: duplicate side effects the reconciler flags)")
    .option("--model-keys", "send the keys as minted by a model (Idemgate-Key-Source: model): fresh-key duplicates are then suppressed at once")
    .option("--reconcile", "after the run, run one reconciler pass and count the fresh-key duplicates it flagged (needs the database: PostgreSQL, or the embedded one while no server holds it)")
    .option("--max-requests <n>", "stop after this many HTTP requests", positiveInt, SIMULATION_DEFAULTS.maxRequests)
    .option("--json", "print the summary as JSON")
    .action(async (flags: SimulateFlags) => {
      const token = flags.token ?? process.env.IDEMGATE_TOKEN;
      if (!token) throw new CliError("simulate needs an API token: --token T or $IDEMGATE_TOKEN (see .data/credentials.txt, or: idemgate token create --scope demo)");
      const stop = new AbortController();
      const onSignal = () => stop.abort(new Error("interrupted"));
      process.once("SIGINT", onSignal);
      try {
        const since = new Date();
        const summary = await runSimulation({
          url: flags.url,
          token,
          agents: flags.agents,
          durationMs: flags.duration,
          seed: flags.seed,
          genuineRepeats: flags.genuineRepeats,
          faults: flags.faults,
          freshKeyDuplicates: flags.freshKeys,
          modelKeys: flags.modelKeys,
          checkFreshKeys: flags.reconcile ? (ran) => reconcileAndCheck(ran, since) : undefined,
          maxRequests: flags.maxRequests,
          allowedOrigins: process.env.IDEMGATE_URL ? [process.env.IDEMGATE_URL] : [],
          log: flags.json ? undefined : (line) => console.error(line),
          signal: stop.signal,
        });
        console.log(flags.json ? JSON.stringify(summary, null, 2) : formatSummary(summary));
      } catch (err) {
        if (err instanceof SimulationError || err instanceof SimulationTargetError) throw new CliError(err.message);
        throw err;
      } finally {
        process.off("SIGINT", onSignal);
      }
    });
}
