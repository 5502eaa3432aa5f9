// What the three framework examples share: the orchestrator's side of Idemgate. It plans one logical
// action, mints its Idempotency-Key once, keeps it with the action, and sends the same key on every
// retry of that action — however the retry comes about (here: the whole agent step is run again
// after the model provider failed mid-step). The framework wrappers only look the key up.
import { randomUUID } from "node:crypto";
import { IdemgateClient, type ToolDescription } from "../../lib/client/index";
import { localFunctions } from "./ledger";

/**
 * One logical action ("charge order 1042"). `key` is minted when the action is planned, before the
 * first attempt, and stored with it (in a real orchestrator: the job row or workflow step), so a
 * retry after a crash or a failure sends the same key. A new action gets a new key.
 */
export interface Action {
  id: string;
  key: string;
  instruction: string;
}

export function planAction(instruction: string): Action {
  return { id: randomUUID(), key: randomUUID(), instruction };
}

/**
 * The key a write tool is called with inside one action: the action's key and the tool's name, so an
 * action that uses two write tools sends two keys, each the same on every retry. A second call of
 * the same write tool in one action with other arguments is refused by the gateway (422, the key
 * was used for other arguments): an action that needs two charges is two actions.
 */
export function keyFor(action: Action, tool: string): string {
  return `${action.key}/${tool}`;
}

/** Tool names as models accept them (letters, digits, `_` and `-`): `payments.charge` → `payments_charge`. */
export function modelToolName(tool: string): string {
  return tool.replace(/[^a-zA-Z0-9_-]/g, "_");
}

/** One answer of the gateway, as the wrappers saw it (the examples print these). */
export interface GatewayCall {
  tool: string;
  key: string | null;
  replayed: boolean;
  status: number;
  body: unknown;
}

/**
 * Calls one Idemgate tool on behalf of a framework's tool wrapper: a write under the action's key
 * (the orchestrator's, never one the model wrote), a read without a key. The client retries what a
 * retry with the same key can get past (a conflict, the gateway unavailable) and throws what only
 * the tool or an operator can settle (an unknown outcome: never retry that with a new key).
 * A client-run tool (`source: "client"`, here `ledger.record`) is a function in this process: it is
 * run under guard() with the same key, so a retry of the step gets its first result back without
 * running it again (logged as `replayed: true`).
 */
export async function callThroughIdemgate(
  client: IdemgateClient,
  tool: ToolDescription,
  args: unknown,
  action: Action | undefined,
  log: GatewayCall[],
): Promise<unknown> {
  if (tool.kind === "write" && !action) throw new Error(`${tool.name} is a write: call it inside an action the orchestrator planned`);
  const key = tool.kind === "write" && action ? keyFor(action, tool.name) : null;
  if (tool.source === "client") {
    const fn = localFunctions[tool.name];
    if (!fn) throw new Error(`${tool.name} runs in the caller's process, and this agent has no function for it`);
    if (!key) throw new Error(`${tool.name} is a client-run read: call the function directly`);
    let ran = false;
    const body = await client.guard(
      tool.name,
      args,
      async () => {
        ran = true;
        return fn(args as never);
      },
      { key },
    );
    log.push({ tool: tool.name, key, replayed: !ran, status: 200, body });
    return body;
  }
  const result = await client.invoke(tool.name, args, { key });
  log.push({ tool: tool.name, key, replayed: result.replayed, status: result.status, body: result.body });
  return result.body;
}

/**
 * Runs one agent step for `action`, and runs it again (same action, same key) when it fails, as a
 * job runner or workflow engine would.
 */
export async function runWithRetries<T>(action: Action, maxAttempts: number, step: (attempt: number) => Promise<T>): Promise<{ result: T; attempts: number }> {
  for (let attempt = 1; ; attempt++) {
    try {
      return { result: await step(attempt), attempts: attempt };
    } catch (err) {
      if (attempt >= maxAttempts) throw err;
      console.error(`action ${action.id}: attempt ${attempt} failed (${(err as Error).message}); running it again with the same key`);
    }
  }
}

/** An Idemgate client from IDEMGATE_URL (default http://localhost:3000) and IDEMGATE_TOKEN. */
export function clientFromEnv(): IdemgateClient {
  const token = process.env.IDEMGATE_TOKEN;
  if (!token) throw new Error("set IDEMGATE_TOKEN to an API token (idg_…; the first start prints one into .data/credentials.txt)");
  return new IdemgateClient({ baseUrl: process.env.IDEMGATE_URL ?? "http://localhost:3000", token, session: `example-${randomUUID()}` });
}

/**
 * The tools every example's agent may use: the demo payment provider's charge and listing (run by the
 * gateway) and `ledger.record` (a local function, run under guard()).
 */
export const EXAMPLE_TOOLS = ["payments.charge", "payments.list_charges", "ledger.record"];

/** The gateway's tools this agent may use, with the client knowing which are reads. */
export async function gatewayTools(client: IdemgateClient, names: string[]): Promise<ToolDescription[]> {
  const tools = (await client.listTools()).filter((tool) => names.includes(tool.name));
  const missing = names.filter((name) => !tools.some((tool) => tool.name === name));
  if (missing.length > 0) throw new Error(`the gateway does not serve ${missing.join(", ")} (the demo tools need IDEMGATE_DEMO_TOOLS=1 with DATABASE_URL)`);
  return tools;
}

/**
 * The scripted "model" of every example (no model runs): attempt 1 calls the charge tool (on the
 * gateway) and then the ledger tool (a local function, guarded), then the provider fails before the
 * model's next answer; attempt 2 plans the same two calls again and finishes. Each turn is consumed
 * once, in order, whichever attempt asks.
 */
export type Turn = { kind: "tool_call"; tool: string; args: Record<string, unknown> } | { kind: "provider_error" } | { kind: "text"; text: string };

export function chargeScript(customerId: string): Turn[] {
  const charge: Turn = { kind: "tool_call", tool: modelToolName("payments.charge"), args: { customerId, amountCents: 1999, currency: "EUR", description: "order 1042" } };
  const record: Turn = { kind: "tool_call", tool: modelToolName("ledger.record"), args: { account: customerId, amountCents: 1999, currency: "EUR", memo: "order 1042" } };
  return [charge, record, { kind: "provider_error" }, charge, record, { kind: "text", text: "The customer was charged and the ledger booked once for order 1042." }];
}

export class ScriptedTurns {
  private next = 0;
  constructor(private readonly turns: Turn[]) {}

  take(): Turn {
    const turn = this.turns[this.next++];
    if (!turn) throw new Error("the script has no more turns");
    return turn;
  }
}

/** The error a model provider's outage looks like to the agent loop (an HTTP 503 from the API). */
export class ProviderUnavailableError extends Error {
  constructor() {
    super("the model provider answered 503 (scripted)");
    this.name = "ProviderUnavailableError";
  }
}

/** What every example prints as its last line (the CI test reads it). */
export interface ExampleSummary {
  example: string;
  customerId: string;
  actionKey: string;
  attempts: number;
  calls: GatewayCall[];
  text: string;
}

export function customerIdFromEnv(): string {
  return process.env.EXAMPLE_CUSTOMER_ID ?? `cus_example_${randomUUID().slice(0, 8)}`;
}
