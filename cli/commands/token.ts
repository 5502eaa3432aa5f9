import { Command } from "commander";
import { createApiToken, listApiTokens, revokeApiToken } from "@/lib/auth/api-tokens";
import { requireReason } from "@/lib/audit/operator-actions";
import { cliActor } from "../actor";
import { CliError } from "../errors";
import { formatTable } from "../format-table";
import { withDatabaseOrServer } from "../through-server";

// Each command opens the database itself, or goes through the running server that holds the
// embedded one (cli/through-server.ts): the same functions run there, with the same audit rows.

type CreatedToken = Awaited<ReturnType<typeof createApiToken>>;
type Listed = Awaited<ReturnType<typeof listApiTokens>>[number];
/** a listed token as the server's JSON carries it: dates as ISO strings */
type ListedToken = Omit<Listed, "createdAt" | "revokedAt" | "lastUsedAt"> & { createdAt: string; revokedAt: string | null; lastUsedAt: string | null };

function withDates(row: ListedToken): Listed {
  const date = (s: string | null) => (s === null ? null : new Date(s));
  return { ...row, createdAt: new Date(row.createdAt), revokedAt: date(row.revokedAt), lastUsedAt: date(row.lastUsedAt) };
}

export function tokenCommand(): Command {
  const token = new Command("token").description("create, list and revoke API tokens");

  token
    .command("create")
    .description("create an API token for one scope; the token is printed once (recorded in the operator audit trail). Works while a server holds the embedded database: through that server")
    .requiredOption("--scope <name>", "the namespace its keys live in (a tenant)")
    .option("--label <text>", "what the token is for")
    .option("--advisory-keys", "keys sent with this token are advisory (minted by a model): also checked by the tool's arguments window")
    .option("--json", "print { id, token, scope, prefix, advisoryKeys } as JSON")
    .action(async (opts: { scope: string; label?: string; advisoryKeys?: boolean; json?: boolean }) => {
      const input = { scope: opts.scope, label: opts.label ?? null, advisoryKeys: opts.advisoryKeys ?? false };
      const created = await withDatabaseOrServer(
        (rt) => createApiToken(rt.db.prisma, { ...input, actor: cliActor() }),
        async (server) => (await server.request<CreatedToken>("POST", "/api/v1/tokens", { ...input, label: input.label ?? undefined })).body,
      );
      if (opts.json) {
        console.log(JSON.stringify(created));
        return;
      }
      console.log(`Created an API token for scope "${created.scope}" (id ${created.id})${created.advisoryKeys ? ", with advisory keys" : ""}.`);
      console.log("It is shown once; store it now:");
      console.log("");
      console.log(`  ${created.token}`);
      console.log("");
    });

  token
    .command("list")
    .description("list API tokens (never the tokens themselves)")
    .option("--json", "print JSON")
    .action(async (opts: { json?: boolean }) => {
      const rows = await withDatabaseOrServer(
        (rt) => listApiTokens(rt.db.prisma),
        async (server) => (await server.request<{ tokens: ListedToken[] }>("GET", "/api/v1/tokens")).body.tokens.map(withDates),
      );
      if (opts.json) {
        console.log(JSON.stringify(rows));
        return;
      }
      if (rows.length === 0) {
        console.log("No API tokens. Create one with: idemgate token create --scope NAME");
        return;
      }
      const date = (d: Date | null) => (d ? d.toISOString().slice(0, 19).replace("T", " ") : "-");
      console.log(
        formatTable(
          ["ID", "SCOPE", "PREFIX", "LABEL", "KEYS", "CREATED", "LAST USED", "STATUS"],
          rows.map((r) => [
            r.id, r.scope, `${r.prefix}…`, r.label ?? "", r.advisoryKeys ? "advisory" : "authoritative",
            date(r.createdAt), date(r.lastUsedAt), r.revokedAt ? `revoked ${date(r.revokedAt)}` : "active",
          ]),
        ),
      );
    });

  token
    .command("revoke")
    .description("revoke an API token by its id: running servers refuse it within 5 seconds (they keep a verified token for up to 5 s); recorded in the operator audit trail")
    .argument("<id>", "the token's id, as `token list` shows it")
    .requiredOption("--reason <text>", "why (kept in the audit trail)")
    .action(async (id: string, opts: { reason: string }) => {
      const reason = requireReason(opts.reason);
      const revoked = await withDatabaseOrServer(
        (rt) => revokeApiToken(rt.db.prisma, { id, actor: cliActor(), reason }),
        async (server) => (await server.request("POST", `/api/v1/tokens/${encodeURIComponent(id)}/revoke`, { reason })).status === 200,
      );
      if (!revoked) throw new CliError(`no active API token with id ${id} (see: idemgate token list)`);
      console.log(`Revoked API token ${id}.`);
    });

  return token;
}
