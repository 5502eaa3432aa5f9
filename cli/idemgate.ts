import { pathToFileURL } from "node:url";
import { Command, CommanderError } from "commander";
import { keyCommand } from "./commands/key";
import { mcpCommand } from "./commands/mcp";
import { migrateCommand } from "./commands/migrate";
import { operatorCommand } from "./commands/operator";
import { reconcileCommand } from "./commands/reconcile";
import { seedCommand } from "./commands/seed";
import { simulateCommand } from "./commands/simulate";
import { storeCommand } from "./commands/store";
import { tokenCommand } from "./commands/token";
import { toolCommand } from "./commands/tool";
import { describeError } from "./errors";

/** The command table, in the order `idemgate --help` lists it. */
const COMMANDS: (() => Command)[] = [
  tokenCommand,
  operatorCommand,
  migrateCommand,
  seedCommand,
  keyCommand,
  toolCommand,
  storeCommand,
  reconcileCommand,
  simulateCommand,
  mcpCommand,
];

export function buildProgram(): Command {
  const program = new Command("idemgate")
    .description("Idemgate: exactly-once tool calls. Commands that open the database use DATABASE_URL, or the embedded one in .data/")
    .showHelpAfterError("(run with --help for usage)")
    .exitOverride();
  for (const make of COMMANDS) program.addCommand(make());
  // Subcommands inherit neither exitOverride nor the help hint: apply them down the tree.
  const apply = (cmd: Command) => {
    cmd.exitOverride().showHelpAfterError("(run with --help for usage)");
    cmd.commands.forEach(apply);
  };
  program.commands.forEach(apply);
  return program;
}

/** Runs one command line; resolves to the exit code. Expected errors are one line on stderr. */
export async function main(argv: readonly string[]): Promise<number> {
  try {
    await buildProgram().parseAsync([...argv]);
    return 0;
  } catch (err) {
    // commander has printed its own message (unknown option, missing argument, help)
    if (err instanceof CommanderError) return err.exitCode;
    const { text, exitCode } = describeError(err);
    process.stderr.write(`idemgate: ${text}\n`);
    return exitCode;
  }
}

/** Some drivers keep sockets or timers open after close(); the exit code must not wait on them. */
export function exitWhenDone(code: number): void {
  process.exitCode = code;
  setTimeout(() => process.exit(code), 200).unref();
}

// `tsx cli/idemgate.ts …` (the npm scripts); bin/idemgate.mjs imports main() instead.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  exitWhenDone(await main(process.argv));
}
