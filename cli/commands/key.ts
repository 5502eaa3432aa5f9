import os from "node:os";
import { Command } from "commander";
import { presentKey } from "@/lib/keys/present-key";
import { releaseKey } from "@/lib/keys/release-key";
import { resolveKey } from "@/lib/keys/resolve-key";
import { CliError } from "../errors";
import { withRuntime } from "../with-runtime";

/** The audit trail names a command-line actor by the machine's user. */
const actor = () => `cli:${os.userInfo().username}@${os.hostname()}`;

export function keyCommand(): Command {
  const key = new Command("key").description("show, release or resolve one idempotency key (recorded in the operator audit trail)");

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
    .action(async (opts: { scope: string; key: string; reason: string }) => {
      const before = await withRuntime((rt) => releaseKey(rt, { ...opts, actor: actor() }));
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
    .action(async (opts: { scope: string; key: string; reason: string; result: string; status: string }) => {
      let result: unknown;
      try {
        result = JSON.parse(opts.result);
      } catch (err) {
        throw new CliError(`--result is not JSON: ${(err as Error).message}`);
      }
      await withRuntime((rt) => resolveKey(rt, { ...opts, result, status: Number(opts.status), actor: actor() }));
      console.log(`Resolved ${opts.scope}/${opts.key}: duplicates now get ${opts.status} with the given result.`);
    });

  return key;
}
