// What the client's transports (transport.ts, node-transport.ts) take and give.

/** What the client reads of an answer (a fetch Response is one). */
export interface WireResponse {
  status: number;
  statusText: string;
  headers: Headers;
  text(): Promise<string>;
}

export interface WireRequest {
  method: "GET" | "POST";
  headers: Record<string, string>;
  body: string | undefined;
  signal: AbortSignal;
}

export type Transport = (url: string, request: WireRequest) => Promise<WireResponse>;
