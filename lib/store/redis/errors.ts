/** A script or command answered something this code does not understand. */
export class UnexpectedRedisReplyError extends Error {
  constructor(what: string, reply: unknown) {
    super(`unexpected Redis reply for ${what}: ${JSON.stringify(reply)?.slice(0, 200)}`);
    this.name = "UnexpectedRedisReplyError";
  }
}

/** A filter combination the Redis indexes cannot answer cheaply. */
export class UnsupportedFilterError extends Error {
  constructor(detail: string) {
    super(`unsupported filter for the Redis key store: ${detail}`);
    this.name = "UnsupportedFilterError";
  }
}
