/** Header lookup by name, case-insensitive: a Fetch `Headers`, or node:http's request headers. */
export interface HeaderSource {
  get(name: string): string | null;
  /**
   * How many times the header was sent, when the source still knows (node:http's raw headers);
   * absent on a Fetch `Headers`, which has joined repeats into one value with ", ".
   */
  count?(name: string): number;
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
