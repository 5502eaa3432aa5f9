// The OpenAI Agents SDK for JavaScript (`@openai/agents`) with every tool call going through Idemgate.
//
//   IDEMGATE_URL=http://localhost:3000 IDEMGATE_TOKEN=idg_… npx tsx examples/openai-agents/index.ts
//
// No model runs: a custom `Model` plays a scripted sequence — call the charge tool (on the gateway)
// and the ledger tool (a local function guarded with guard(), examples/shared/ledger.ts), then the
// provider fails; the orchestrator runs the agent again with the same action key, the model calls
// both tools again, and Idemgate answers both calls with the first results (replayed): one charge,
// one ledger line.
import { Agent, run, setTracingDisabled, tool, Usage, type Model, type ModelRequest, type ModelResponse, type RunContext, type Tool } from "@openai/agents";
import type { IdemgateClient, ToolDescription } from "../../lib/client/index";
import {
  callThroughIdemgate,
  chargeScript,
  clientFromEnv,
  customerIdFromEnv,
  EXAMPLE_TOOLS,
  gatewayTools,
  modelToolName,
  planAction,
  ProviderUnavailableError,
  runWithRetries,
  ScriptedTurns,
  type Action,
  type ExampleSummary,
  type GatewayCall,
} from "../shared/orchestrator";

/** The run's context, set by the orchestrator and handed to every tool call (`run(…, { context })`). */
interface StepContext {
  action: Action;
}

type NonStrictParameters = Extract<Parameters<typeof tool>[0], { strict: false }>["parameters"];

/**
 * Idemgate's tools as Agents SDK function tools. The key comes from the run context, which the
 * orchestrator sets; a key the model might write into the arguments is not used. `strict: false`:
 * the gateway validates the arguments against the tool's own JSON Schema.
 */
export function idemgateTools(client: IdemgateClient, tools: ToolDescription[], log: GatewayCall[]): Tool<StepContext>[] {
  return tools.map((description) =>
    tool({
      name: modelToolName(description.name),
      description: description.description,
      parameters: description.argumentsSchema as NonStrictParameters,
      strict: false,
      execute: async (args: unknown, runContext?: RunContext<StepContext>) =>
        JSON.stringify(await callThroughIdemgate(client, description, args, runContext?.context.action, log)),
    }),
  );
}

/** A `Model` that answers each request with the script's next turn. */
class ScriptedModel implements Model {
  private callId = 0;
  constructor(private readonly script: ScriptedTurns) {}

  async getResponse(_request: ModelRequest): Promise<ModelResponse> {
    const turn = this.script.take();
    if (turn.kind === "provider_error") throw new ProviderUnavailableError();
    if (turn.kind === "tool_call") {
      return {
        usage: new Usage(),
        output: [{ type: "function_call", callId: `call_${++this.callId}`, name: turn.tool, arguments: JSON.stringify(turn.args), status: "completed" }],
      };
    }
    return {
      usage: new Usage(),
      output: [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: turn.text }] }],
    };
  }

  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error("this scripted model does not stream");
  }
}

export async function main(): Promise<ExampleSummary> {
  setTracingDisabled(true); // traces would go to OpenAI's platform; this example runs offline
  const client = clientFromEnv();
  const customerId = customerIdFromEnv();
  const log: GatewayCall[] = [];
  const agent = new Agent<StepContext>({
    name: "billing",
    instructions: "Charge customers for their orders.",
    model: new ScriptedModel(new ScriptedTurns(chargeScript(customerId))),
    tools: idemgateTools(client, await gatewayTools(client, EXAMPLE_TOOLS), log),
  });

  const action = planAction(`Charge customer ${customerId} 19.99 EUR for order 1042.`);
  const { result, attempts } = await runWithRetries(action, 3, () => run(agent, action.instruction, { context: { action }, maxTurns: 5 }));
  return { example: "openai-agents", customerId, actionKey: action.key, attempts, calls: log, text: String(result.finalOutput ?? "") };
}

console.log(JSON.stringify(await main()));
