import { PassThrough } from "node:stream";
import { runStdioBridge } from "@/lib/mcp/stdio-bridge";

/**
 * The stdio bridge (`idemgate mcp`) run in this process against a gateway, spoken to line by line as
 * an MCP client over stdio would: `request(method, params)` writes a JSON-RPC request with the next
 * id and resolves to its answer; `notify` writes a notification; `close` ends stdin and waits for
 * the bridge to stop.
 */
export function stdioBridgeSession(options: { url: string; token: string }) {
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  const answers = new Map<number, any>();
  let buffered = "";
  stdout.on("data", (chunk) => {
    buffered += chunk;
    for (let nl = buffered.indexOf("\n"); nl >= 0; nl = buffered.indexOf("\n")) {
      const message = JSON.parse(buffered.slice(0, nl));
      buffered = buffered.slice(nl + 1);
      if (message.id !== undefined) answers.set(message.id, message);
    }
  });
  const bridge = runStdioBridge({ url: new URL(options.url), token: options.token, stdin, stdout, log: () => {} });
  let lastId = 0;
  const write = (message: Record<string, unknown>) => stdin.write(`${JSON.stringify({ jsonrpc: "2.0", ...message })}\n`);
  return {
    async request(method: string, params?: unknown): Promise<any> {
      const id = ++lastId;
      write({ id, method, ...(params === undefined ? {} : { params }) });
      while (!answers.has(id)) await new Promise((r) => setTimeout(r, 20));
      return answers.get(id);
    },
    notify(method: string, params?: unknown): void {
      write({ method, ...(params === undefined ? {} : { params }) });
    },
    async close(): Promise<void> {
      stdin.end();
      await bridge;
    },
  };
}
