// Types for scripts/forwarded-proto.mjs, which its test imports.
import type { IncomingMessage } from "node:http";

export declare function trustedProxyCount(env?: Record<string, string | undefined>): number;
export declare function setForwardedProto(req: IncomingMessage, trustedProxies: number): void;
