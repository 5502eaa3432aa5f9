// The Vercel AI SDK (`ai`) with every tool call going through Idemgate.
//
//   IDEMGATE_URL=http://localhost:3000 IDEMGATE_TOKEN=idg_… npx tsx examples/ai-sdk/index.ts
//
// No model runs: `MockLanguageModelV3` from `ai/test` plays a scripted sequence — call the charge
// tool (on the gateway) and the ledger tool (a local function guarded with guard(),
// examples/shared/ledger.ts), then the provider fails; the orchestrator runs the step again with
// the same action key, the model calls both tools again, and Idemgate answers both calls with the
// first results (replayed): one charge, one ledger line.
import { generateText, jsonSchema, stepCountIs, tool, type ToolSet } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import type { LanguageModelV3GenerateResult } from "@ai-sdk/provider";
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

/** What the orchestrator hands every tool call of one agent step (`experimental_context`). */
interface StepContext {
  action: Action;
}

/**
 * Idemgate's tools as AI SDK tools. The key comes from the step's context, which the orchestrator
 * sets; a key the model might write into the arguments is not used.
 */
export function idemgateTools(client: IdemgateClient, tools: ToolDescription[], log: GatewayCall[]): ToolSet {
  return Object.fromEntries(
    tools.map((description) => [
      modelToolName(description.name),
      tool({
        description: description.description,
        inputSchema: jsonSchema<Record<string, unknown>>(description.argumentsSchema),
        execute: async (args, { experimental_context }) =>
          callThroughIdemgate(client, description, args, (experimental_context as StepContext | undefined)?.action, log),
      }),
    ]),
  );
}

const usage = {
  inputTokens: { total: 0, noCache: 0, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 0, text: 0, reasoning: 0 },
};

/** A mock model that answers each request with the script's next turn. */
function scriptedModel(script: ScriptedTurns): MockLanguageModelV3 {
  let callId = 0;
  return new MockLanguageModelV3({
    doGenerate: async (): Promise<LanguageModelV3GenerateResult> => {
      const turn = script.take();
      if (turn.kind === "provider_error") throw new ProviderUnavailableError();
      if (turn.kind === "tool_call") {
        return {
          content: [{ type: "tool-call", toolCallId: `call_${++callId}`, toolName: turn.tool, input: JSON.stringify(turn.args) }],
          finishReason: { unified: "tool-calls", raw: "tool_calls" },
          usage,
          warnings: [],
        };
      }
      return { content: [{ type: "text", text: turn.text }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] };
    },
  });
}

export async function main(): Promise<ExampleSummary> {
  const client = clientFromEnv();
  const customerId = customerIdFromEnv();
  const log: GatewayCall[] = [];
  const tools = idemgateTools(client, await gatewayTools(client, EXAMPLE_TOOLS), log);
  const model = scriptedModel(new ScriptedTurns(chargeScript(customerId)));

  const action = planAction(`Charge customer ${customerId} 19.99 EUR for order 1042.`);
  const { result, attempts } = await runWithRetries(action, 3, () =>
    generateText({
      model,
      tools,
      prompt: action.instruction,
      stopWhen: stepCountIs(5),
      maxRetries: 0, // the orchestrator retries the whole step
      experimental_context: { action } satisfies StepContext,
    }),
  );
  return { example: "ai-sdk", customerId, actionKey: action.key, attempts, calls: log, text: result.text };
}

console.log(JSON.stringify(await main()));
