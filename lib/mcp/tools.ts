import type { Tool } from "@modelcontextprotocol/server";
import type { ToolDefinition } from "@/lib/tools/define-tool";
import type { ToolRegistry } from "@/lib/tools/registry";
import { KEY_ARGUMENT } from "./key-fields";
import { mcpOriginOf } from "./upstream/proxied-tool";

export { KEY_ARGUMENT, META_KEY_FIELD } from "./key-fields";

const KEY_ARGUMENT_SCHEMA = {
  type: "string",
  minLength: 1,
  maxLength: 255,
  description:
    "Optional. A name for this one action, such as a UUID you make up once for it: send the same value again if you retry this same action, " +
    "a new value for a new action. A retried action with the same value is not run again; its first result is returned.",
};

/** How a write tool's description tells a model (and its developer) what the gateway does. */
const WRITE_NOTE =
  "Changes something and runs once per idempotency key: send the key as tools/call `params.idempotencyKey` " +
  "(or the `idempotency_key` argument); a retry with the same key returns the first result without running again.";

/**
 * Whether the gateway may use `idempotency_key` for itself (advertise it, read it as an advisory
 * key, and take it out of the arguments): only when the tool certainly has no argument of that
 * name. A guarded MCP server's tool whose schema Idemgate cannot read may have one, which must
 * reach the server untouched: Idemgate neither advertises nor takes it there.
 */
export function advertisesKeyArgument(tool: ToolDefinition): boolean {
  if (mcpOriginOf(tool)?.schemaRead === false) return false;
  const declared = tool.inputSchema?.properties;
  const declaresIt = typeof declared === "object" && declared !== null && Object.hasOwn(declared, KEY_ARGUMENT);
  return tool.kind === "write" && !declaresIt && !Object.hasOwn(tool.schema.shape as object, KEY_ARGUMENT);
}

const cache = new WeakMap<ToolRegistry, Tool[]>();

/** `tools/list`: every tool with its input schema, description and annotations. Computed once per registry. */
export function listMcpTools(registry: ToolRegistry): Tool[] {
  let tools = cache.get(registry);
  if (!tools) {
    // a tool run by its caller cannot be called here (tools/call answers runs_in_client): not listed
    tools = registry.list().filter((tool) => tool.runs !== "client").map((tool) => describeForMcp(registry, tool));
    cache.set(registry, tools);
  }
  return tools;
}

function describeForMcp(registry: ToolRegistry, tool: ToolDefinition): Tool {
  const described = registry.describe(tool);
  const origin = mcpOriginOf(tool);
  // another MCP server's tool is listed with its own schema and annotations
  const schema = { ...(origin ? origin.inputSchema : described.argumentsSchema) } as Record<string, unknown>;
  if (schema.type !== "object") schema.type = "object";
  if (advertisesKeyArgument(tool)) {
    schema.properties = { ...(schema.properties as Record<string, unknown> | undefined), [KEY_ARGUMENT]: KEY_ARGUMENT_SCHEMA };
  }
  const write = tool.kind === "write";
  return {
    name: tool.name,
    description: write ? `${tool.description}\n\n${WRITE_NOTE}` : tool.description,
    inputSchema: schema as Tool["inputSchema"],
    // as its server declares them: a title and icons to show, the shape of its structured results,
    // whether it runs as a task (proxied-tool.ts)
    ...(origin?.title !== undefined ? { title: origin.title } : {}),
    ...(origin?.icons !== undefined ? { icons: origin.icons } : {}),
    ...(origin?.outputSchema !== undefined ? { outputSchema: origin.outputSchema } : {}),
    ...(origin?.execution ? { execution: origin.execution } : {}),
    annotations: origin
      ? { ...origin.annotations }
      : write
      ? {
          readOnlyHint: false,
          // Repeating an action under the same key has no further effect; the same arguments under a
          // new key are a new action (a second charge), which is what this hint is about.
          idempotentHint: false,
          // What a tool changes is not declared with it yet: assume the worst, as MCP's default does.
          destructiveHint: true,
          openWorldHint: tool.upstream !== undefined,
        }
      : { readOnlyHint: true, openWorldHint: tool.upstream !== undefined },
    _meta: {
      "io.idemgate/kind": tool.kind,
      // required: a keyless call is refused; optional: keyless calls are deduplicated by their arguments
      "io.idemgate/idempotency-key": described.idempotencyKey,
      ...(origin ? { "io.idemgate/origin": { server: origin.server, tool: origin.tool } } : {}),
    },
  };
}
