import { ProtocolErrorCode as ErrorCode } from "@modelcontextprotocol/server";

/**
 * A JSON-RPC error answered as it is: code and message. The SDK's McpError puts "MCP error <code>: "
 * into its message, which the SDK then sends as the message, so the client's own McpError shows
 * the prefix twice.
 */
export class JsonRpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
    this.name = "JsonRpcError";
  }
}

/** An McpError's message without the prefix(es) its constructor added. */
export function withoutMcpPrefix(message: string): string {
  return message.replace(/^(MCP error -?\d+: )+/, "");
}

/** `tools/call` params as sent: `idempotencyKey` is not in the SDK's schema yet, so it is read here. */
export interface CallParams {
  name: string;
  arguments?: Record<string, unknown>;
  idempotencyKey?: unknown;
  _meta?: Record<string, unknown>;
  [extra: string]: unknown;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The params, or a JSON-RPC invalid-params error a person can read (the SDK's would be a schema dump, as an internal error). */
export function readCallParams(params: unknown): CallParams {
  if (!isObject(params)) throw new JsonRpcError(ErrorCode.InvalidParams, "tools/call needs params: an object with the tool's name and its arguments");
  if (typeof params.name !== "string" || params.name === "") throw new JsonRpcError(ErrorCode.InvalidParams, "tools/call needs params.name: the name of the tool to call");
  if (params.arguments !== undefined && !isObject(params.arguments)) {
    throw new JsonRpcError(ErrorCode.InvalidParams, `the arguments of ${params.name} must be an object of named arguments, not ${describeType(params.arguments)}`);
  }
  if (params._meta !== undefined && !isObject(params._meta)) throw new JsonRpcError(ErrorCode.InvalidParams, "tools/call params._meta must be an object");
  return params as CallParams;
}

function describeType(value: unknown): string {
  return value === null ? "null" : Array.isArray(value) ? "an array" : `a ${typeof value}`;
}
