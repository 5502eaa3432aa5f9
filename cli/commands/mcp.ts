import { Command } from "commander";
import { BridgeError, mcpEndpoint, runStdioBridge } from "@/lib/mcp/stdio-bridge";
import { CliError } from "../errors";

export function mcpCommand(): Command {
  return new Command("mcp")
    .description(
      "speak MCP on stdin/stdout and forward to a running Idemgate's /mcp, for MCP clients that only launch local processes " +
        "(nothing but the protocol goes to stdout; messages go to stderr)",
    )
    .option("--url <url>", "the Idemgate server, or its MCP endpoint", "http://localhost:3000/mcp")
    .option("--token <token>", "an API token (default: $IDEMGATE_TOKEN)")
    .action(async (opts: { url: string; token?: string }) => {
      const token = opts.token ?? process.env.IDEMGATE_TOKEN?.trim();
      if (!token) throw new CliError("give an API token with --token or IDEMGATE_TOKEN (create one with: idemgate token create --scope NAME)");
      let url: URL;
      try {
        url = mcpEndpoint(opts.url);
      } catch (err) {
        throw new CliError(err instanceof TypeError && err.message.startsWith("--url") ? err.message : `--url is not a URL: ${opts.url}`);
      }
      try {
        await runStdioBridge({ url, token });
      } catch (err) {
        if (err instanceof BridgeError) throw new CliError(err.message);
        throw err;
      }
    });
}
