import os from "node:os";
import { Command } from "commander";
import { presentKey } from "@/lib/operator/present-key";
import { probeKey, type ProbeKeyResult } from "@/lib/operator/probe-key";
import { releaseKey, ReservationToken } from "@/lib/operator/release-key";
import { resolveKey } from "@/lib/operator/resolve-key";
import { CliError } from "../errors";
import { withRuntime } from "../with-runtime";

/** The audit trail names a command-line actor by the machine's user. */
const actor = () => `cli:${os.userInfo().username}@${os.hostname()}`;

const TOKEN_HELP = "the fencing token `key show` printed: decide only while that call holds the key (a key another call took since is refused)";

function tokenOption(text: string | undefined): { token?: number } {
  if (text === undefined) return {};
  const parsed = ReservationToken.safeParse(/^\d+$/.test(text) ? Number(text) : NaN);
  if (!parsed.success) throw new CliError(`--token must be the key's fencing token, a positive whole number (got "${text}")`);
  return { token: parsed.data };
}

export function keyCommand(): Command {
  const key = new Command("key").description("show, release, resolve or probe one idempotency key (recorded in the operator audit trail)");

  key
    .command("show")
    .description("print a key's record as JSON")
    .requiredOption("--scope <scope>")
    .requiredOption("--key <key>")
    .action(async (opts: { scope: string; key: string }) => {
      const record = await withRuntime((rt) => rt.store.get(opts.scope, opts.key));
      if (!record) throw new CliError(`no record under ${opts.scope}/${opts.key}`);
      console.log(JSON.stringify(presentKey(record, Date.now(), true), null, 2));
    });

  key
    .command("release")
    .description("the side effect did not happen: delete the reservation so the next retry runs it")
    .requiredOption("--scope <scope>")
    .requiredOption("--key <key>")
    .requiredOption("--reason <text>", "why (kept in the audit trail)")
    .option("--force", "also a call that is still running (inflight within its lease): it may still complete, and its late result is then flagged")
    .option("--token <n>", TOKEN_HELP)
    .action(async (opts: { scope: string; key: string; reason: string; force?: boolean; token?: string }) => {
      const { scope, key, reason } = opts;
      const token = tokenOption(opts.token);
      const before = await withRuntime((rt) => releaseKey(rt, { scope, key, reason, ...token, force: opts.force ?? false, actor: actor() }));
      console.log(`Released ${opts.scope}/${opts.key} (was ${presentKey(before, Date.now()).state}); the next call with this key runs the tool.`);
    });

  key
    .command("resolve")
    .description("the side effect happened: mark the key done with the result duplicates will get")
    .requiredOption("--scope <scope>")
    .requiredOption("--key <key>")
    .requiredOption("--reason <text>", "why (kept in the audit trail)")
    .requiredOption("--result <json>", "the response body duplicates get, as JSON")
    .option("--status <code>", "the response status duplicates get", "200")
    .option("--force", "also a call that is still running (inflight within its lease): it may still complete, and its late result is then flagged")
    .option("--token <n>", TOKEN_HELP)
    .action(async (opts: { scope: string; key: string; reason: string; result: string; status: string; force?: boolean; token?: string }) => {
      const token = tokenOption(opts.token);
      let result: unknown;
      try {
        result = JSON.parse(opts.result);
      } catch (err) {
        throw new CliError(`--result is not JSON: ${(err as Error).message}`);
      }
      const { scope, key, reason } = opts;
      await withRuntime((rt) => resolveKey(rt, { scope, key, reason, ...token, result, status: Number(opts.status), force: opts.force ?? false, actor: actor() }));
      console.log(`Resolved ${opts.scope}/${opts.key}: duplicates now get ${opts.status} with the given result.`);
    });

  key
    .command("probe")
    .description("ask a stuck or unknown key's tool whether its call happened: applied resolves the key with the tool's result, not applied releases it, otherwise nothing changes")
    .requiredOption("--scope <scope>")
    .requiredOption("--key <key>")
    .option("--json", "print the answer and what was done as JSON")
    .action(async (opts: { scope: string; key: string; json?: boolean }) => {
      const out = await withRuntime((rt) => probeKey(rt, { scope: opts.scope, key: opts.key, actor: actor() }));
      if (opts.json) {
        const record = out.record ? presentKey(out.record, Date.now(), true) : null;
        console.log(JSON.stringify({ answer: out.answer, action: out.action, record }, null, 2));
        return;
      }
      console.log(probeSentence(`${opts.scope}/${opts.key}`, out));
    });

  return key;
}

/** The tool's answer and what it did to the key, in one line. */
function probeSentence(name: string, out: ProbeKeyResult): string {
  const { answer, action } = out;
  if (answer.outcome === "applied" && action === "resolved") {
    return `The tool says it happened: ${name} is resolved with its result (HTTP ${answer.status}); retries get that result.`;
  }
  if (answer.outcome === "not_applied" && action === "released") {
    return `The tool says it did not happen: ${name} is released; the next call with this key runs the tool.`;
  }
  const now = out.record ? presentKey(out.record, Date.now()).state : "absent";
  if (answer.outcome === "unknown") {
    return `The tool cannot tell whether it happened${answer.note ? ` (${answer.note})` : ""}; ${name} stays ${now}: check the downstream system, then release or resolve it.`;
  }
  const said = answer.outcome === "applied" ? "it happened" : "it did not happen";
  return `The tool says ${said}, but ${name} changed while it was asked (now ${now}); it was left as it is.`;
}
