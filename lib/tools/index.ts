import config from "./config";
import { ToolRegistry } from "./registry";

export { defineTool, defineTools, type ToolDefinition, type UpstreamConfig, type InProcessContext } from "./define-tool";
export type { ListEffects, SideEffect } from "./effects";
export { ToolRegistry, type ToolDescription, type JsonSchema } from "./registry";
export type { OpenApiDocument } from "./openapi";
export { derivedKey, upstreamProber, upstreamRunner } from "./upstream";
export { demoTools } from "./demo";

let registry: ToolRegistry | undefined;

/** The registry of lib/tools/config.ts, built on first use. */
export function getRegistry(): ToolRegistry {
  registry ??= new ToolRegistry(config);
  return registry;
}
