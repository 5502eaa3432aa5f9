import type { IncomingMessage, Server, ServerOptions, ServerResponse } from "node:http";

export interface ConnectionLimits {
  bodyIdleTimeoutMs: number;
  requestTimeoutMs: number;
  maxConnections: number;
}
export declare const HEADERS_TIMEOUT_MS: number;
export declare function connectionLimitsFromEnv(env?: NodeJS.ProcessEnv): ConnectionLimits;
export declare function serverOptions(limits: ConnectionLimits): ServerOptions;
export interface Admit {
  (req: IncomingMessage, res: ServerResponse): boolean;
  /** how many requests' bodies are watched now */
  watching(): number;
}
export declare function applyConnectionLimits(server: Server, limits: ConnectionLimits): Admit;
