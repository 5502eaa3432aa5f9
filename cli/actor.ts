import os from "node:os";

/** How the audit trail names a command-line actor: `cli:<os user>@<host>`. */
export function cliActor(): string {
  return `cli:${os.userInfo().username}@${os.hostname()}`;
}
