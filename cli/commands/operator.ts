import { Command, Option } from "commander";
import { createOperator, disableOperator, enableOperator } from "@/lib/auth/operators";
import { MIN_PASSWORD_LENGTH } from "@/lib/auth/passwords";
import { ROLES } from "@/lib/auth/roles";
import { cliActor } from "../actor";
import { CliError } from "../errors";
import { readPassword } from "../read-password";
import { withRuntime } from "../with-runtime";

export function operatorCommand(): Command {
  const operator = new Command("operator").description("manage console operators");

  operator
    .command("create")
    .description("create a console operator; the password is read from stdin (first line of a pipe, or typed without echo)")
    .requiredOption("--email <email>", "their sign-in email")
    .addOption(new Option("--role <role>", "viewer (read-only) or operator (may release and resolve keys)").choices(ROLES).makeOptionMandatory())
    .action(async (opts: { email: string; role: string }) => {
      const password = await readPassword();
      // Checked before the database is opened, so a short password costs no migration run.
      if (password.length < MIN_PASSWORD_LENGTH) {
        throw new CliError(`the password must have at least ${MIN_PASSWORD_LENGTH} characters (it has ${password.length}); nothing was created`);
      }
      const created = await withRuntime((rt) => createOperator(rt.db.prisma, { email: opts.email, password, role: opts.role }));
      console.log(`Created ${created.role} ${created.email} (id ${created.id}).`);
    });

  operator
    .command("disable")
    .description("disable a console operator: no more sign-ins, and their sessions end at once (recorded in the operator audit trail)")
    .requiredOption("--email <email>", "their sign-in email")
    .option("--reason <text>", "why (kept in the audit trail)", "disabled from the command line")
    .action(async (opts: { email: string; reason: string }) => {
      const reason = opts.reason.trim();
      if (reason === "") throw new CliError("--reason must not be empty");
      const out = await withRuntime((rt) => disableOperator(rt.db.prisma, { email: opts.email, actor: cliActor(), reason }));
      const ended = `${out.sessionsEnded} session${out.sessionsEnded === 1 ? "" : "s"} ended`;
      console.log(out.alreadyDisabled ? `${out.operator.email} was disabled already (${ended}).` : `Disabled ${out.operator.email} (${ended}).`);
    });

  operator
    .command("enable")
    .description("enable a disabled console operator: they may sign in again with their password (recorded in the operator audit trail)")
    .requiredOption("--email <email>", "their sign-in email")
    .option("--reason <text>", "why (kept in the audit trail)", "enabled from the command line")
    .action(async (opts: { email: string; reason: string }) => {
      const reason = opts.reason.trim();
      if (reason === "") throw new CliError("--reason must not be empty");
      const out = await withRuntime((rt) => enableOperator(rt.db.prisma, { email: opts.email, actor: cliActor(), reason }));
      console.log(out.alreadyEnabled ? `${out.operator.email} was enabled already.` : `Enabled ${out.operator.email}.`);
    });

  return operator;
}
