/** Header lookup by name, case-insensitive: a Fetch `Headers`, or node:http's request headers. */
export interface HeaderSource {
  get(name: string): string | null;
}

/** An HTTP answer before it is a `Response`: route handlers wrap it, the gateway's fast path writes it as it is. */
export interface HttpAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export function toResponse(answer: HttpAnswer): Response {
  return new Response(answer.body, { status: answer.status, headers: answer.headers });
}
