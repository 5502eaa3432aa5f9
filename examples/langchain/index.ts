// LangChain.js (`@langchain/core`) with every tool call going through Idemgate.
//
//   IDEMGATE_URL=http://localhost:3000 IDEMGATE_TOKEN=idg_… npx tsx examples/langchain/index.ts
//
// No model runs: a fake chat model plays a scripted sequence — call the charge tool (on the
// gateway) and the ledger tool (a local function guarded with guard(), examples/shared/ledger.ts),
// then the provider fails; the orchestrator runs the step again with the same action key, the model
// calls both tools again, and Idemgate answers both calls with the first results (replayed): one
// charge, one ledger line. The agent loop is the plain tool-calling loop of @langchain/core
// (LangGraph's prebuilt agents call tools the same way).
import { BaseChatModel, type BaseChatModelCallOptions } from "@langchain/core/language_models/chat_models";
import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";
import type { RunnableConfig } from "@langchain/core/runnables";
import { tool, type StructuredToolInterface } from "@langchain/core/tools";
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

/** What the orchestrator puts into the step's RunnableConfig (`configurable`), read by every tool call. */
interface StepConfigurable {
  action: Action;
}

/**
 * Idemgate's tools as LangChain tools. The key comes from the step's `configurable`, which the
 * orchestrator sets; a key the model might write into the arguments is not used.
 */
export function idemgateTools(client: IdemgateClient, tools: ToolDescription[], log: GatewayCall[]): StructuredToolInterface[] {
  return tools.map((description) =>
    tool(
      async (args: unknown, config: RunnableConfig) =>
        JSON.stringify(await callThroughIdemgate(client, description, args, (config.configurable as StepConfigurable | undefined)?.action, log)),
      { name: modelToolName(description.name), description: description.description, schema: description.argumentsSchema },
    ),
  );
}

/** A fake chat model that answers each request with the script's next turn. */
class ScriptedChatModel extends BaseChatModel<BaseChatModelCallOptions> {
  private callId = 0;
  constructor(private readonly script: ScriptedTurns) {
    super({});
  }

  _llmType(): string {
    return "scripted";
  }

  async _generate(_messages: BaseMessage[]): Promise<ChatResult> {
    const turn = this.script.take();
    if (turn.kind === "provider_error") throw new ProviderUnavailableError();
    const message =
      turn.kind === "tool_call"
        ? new AIMessage({ content: "", tool_calls: [{ type: "tool_call", id: `call_${++this.callId}`, name: turn.tool, args: turn.args }] })
        : new AIMessage(turn.text);
    return { generations: [{ text: turn.kind === "text" ? turn.text : "", message }] };
  }
}

/** The tool-calling loop: ask the model, run the tools it calls, until it answers with text. */
async function runStep(model: BaseChatModel, tools: StructuredToolInterface[], action: Action): Promise<string> {
  const config: RunnableConfig = { configurable: { action } satisfies StepConfigurable };
  const byName = new Map(tools.map((t) => [t.name, t]));
  const messages: BaseMessage[] = [new HumanMessage(action.instruction)];
  for (let turn = 0; turn < 5; turn++) {
    const reply = await model.invoke(messages, config);
    messages.push(reply);
    if (!reply.tool_calls?.length) return reply.text;
    for (const call of reply.tool_calls) {
      const target = byName.get(call.name);
      if (!target) throw new Error(`the model called an unknown tool ${call.name}`);
      messages.push(await target.invoke(call, config));
    }
  }
  throw new Error("the model did not finish within 5 turns");
}

export async function main(): Promise<ExampleSummary> {
  const client = clientFromEnv();
  const customerId = customerIdFromEnv();
  const log: GatewayCall[] = [];
  const tools = idemgateTools(client, await gatewayTools(client, EXAMPLE_TOOLS), log);
  const model = new ScriptedChatModel(new ScriptedTurns(chargeScript(customerId)));

  const action = planAction(`Charge customer ${customerId} 19.99 EUR for order 1042.`);
  const { result, attempts } = await runWithRetries(action, 3, () => runStep(model, tools, action));
  return { example: "langchain", customerId, actionKey: action.key, attempts, calls: log, text: result };
}

console.log(JSON.stringify(await main()));
