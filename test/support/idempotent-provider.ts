import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** What a provider answers when its idempotency rules refuse a request. */
interface Answer {
  status: number;
  body: unknown;
}

/** A provider's published idempotency rules, as the local service plays them. */
export interface ProviderRules {
  name: string;
  keyHeader: string;
  keyMaxLength: number;
  /** the request body as the provider reads it */
  parse(body: string, contentType: string | undefined): unknown;
  /** the key's first request is still being processed */
  inProgress: Answer;
  /** the key was used with another request */
  mismatch: Answer;
  /** the key is longer than the provider takes */
  keyTooLong: Answer;
}

const json = (body: string) => (body === "" ? null : JSON.parse(body));

export const STRIPE: ProviderRules = {
  name: "stripe",
  keyHeader: "idempotency-key",
  keyMaxLength: 255,
  parse: (body, type) => {
    if (type !== "application/x-www-form-urlencoded") throw new Error(`Stripe reads forms, not ${type}`);
    return [...new URLSearchParams(body)];
  },
  inProgress: { status: 409, body: { error: { type: "idempotency_error", message: "There is currently another in-progress request using this Idempotent Key." } } },
  mismatch: { status: 400, body: { error: { type: "idempotency_error", message: "Keys for idempotent requests can only be used with the same parameters they were first used with." } } },
  keyTooLong: { status: 400, body: { error: { type: "invalid_request_error" } } },
};

export const RESEND: ProviderRules = {
  name: "resend",
  keyHeader: "idempotency-key",
  keyMaxLength: 256,
  parse: (body) => json(body),
  inProgress: { status: 409, body: { name: "concurrent_idempotent_requests", statusCode: 409 } },
  mismatch: { status: 409, body: { name: "invalid_idempotent_request", statusCode: 409 } },
  keyTooLong: { status: 400, body: { name: "invalid_idempotency_key", statusCode: 400 } },
};

export const ADYEN: ProviderRules = {
  name: "adyen",
  keyHeader: "idempotency-key",
  keyMaxLength: 64,
  parse: (body) => json(body),
  inProgress: { status: 422, body: { status: 422, errorCode: "704", message: "request already processed or in progress", errorType: "validation" } },
  // Adyen does not compare bodies: a key's stored answer is returned for any request
  mismatch: { status: 0, body: null },
  keyTooLong: { status: 422, body: { status: 422, errorCode: "702", message: "Idempotency-Key too long", errorType: "validation" } },
};

export const PAYPAL: ProviderRules = {
  name: "paypal",
  keyHeader: "paypal-request-id",
  keyMaxLength: 108,
  parse: (body) => json(body),
  inProgress: { status: 422, body: { name: "UNPROCESSABLE_ENTITY", details: [{ issue: "DUPLICATE_REQUEST_ID" }] } },
  mismatch: { status: 0, body: null },
  keyTooLong: { status: 400, body: { name: "INVALID_REQUEST" } },
};

export interface ReceivedRequest {
  method: string;
  /** the request target as sent (path and query, still encoded) */
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** the key the provider read */
  key: string | undefined;
}

/**
 * How the next new key's request goes: answered, its answer lost after it was applied (the socket
 * closed before a byte of the answer), or applied slowly (answered after `holdMs`).
 */
export type Fate = "answer" | "lose_answer" | { holdMs: number };

/**
 * A provider that deduplicates on its idempotency header as its rules say: it stores each key's
 * answer and replays it (with `Idempotent-Replayed: true`), answers its in-progress conflict while
 * the key's first request runs, and its mismatch answer for the key with another request. Each
 * applied request is one effect.
 */
export class IdempotentProvider {
  readonly received: ReceivedRequest[] = [];
  readonly effects: { key: string; request: unknown; url: string }[] = [];
  private readonly stored = new Map<string, { fingerprint: string; answer: Answer | null }>();
  private readonly fates: Fate[] = [];
  private server: Server | undefined;
  base = "";

  constructor(readonly rules: ProviderRules) {}

  /** the fates of the next new keys' requests, in order; then each is answered */
  next(...fates: Fate[]): void {
    this.fates.push(...fates);
  }

  /** the provider's retention passed for this key: it no longer remembers it */
  forgetKey(key: string): void {
    this.stored.delete(key);
  }

  effectsOf(key: string): number {
    return this.effects.filter((e) => e.key === key).length;
  }

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      let body = "";
      req.on("data", (chunk) => (body += chunk));
      req.on("end", () => {
        const key = req.headers[this.rules.keyHeader] as string | undefined;
        this.received.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body, key });
        const send = (answer: Answer, replayed = false) => {
          if (res.destroyed) return;
          res.writeHead(answer.status, { "content-type": "application/json", ...(replayed ? { "idempotent-replayed": "true" } : {}) });
          res.end(JSON.stringify(answer.body));
        };
        if (!key) return send({ status: 400, body: { error: "an idempotency key is required" } });
        if (key.length > this.rules.keyMaxLength) return send(this.rules.keyTooLong);
        const fingerprint = `${req.method} ${req.url} ${body}`;
        const earlier = this.stored.get(key);
        if (earlier) {
          if (earlier.answer === null) return send(this.rules.inProgress);
          if (earlier.fingerprint !== fingerprint && this.rules.mismatch.status !== 0) return send(this.rules.mismatch);
          return send(earlier.answer, true);
        }
        let request: unknown;
        try {
          request = this.rules.parse(body, req.headers["content-type"]);
        } catch (err) {
          return send({ status: 400, body: { error: (err as Error).message } });
        }
        const entry = { fingerprint, answer: null as Answer | null };
        this.stored.set(key, entry);
        const fate = this.fates.shift() ?? "answer";
        const apply = () => {
          this.effects.push({ key, request, url: req.url ?? "" });
          entry.answer = { status: 200, body: { id: `${this.rules.name}_${this.effects.length}`, object: "created" } };
        };
        if (fate === "lose_answer") {
          apply();
          return req.socket.destroy();
        }
        if (fate === "answer") {
          apply();
          return send(entry.answer!);
        }
        setTimeout(() => {
          apply();
          send(entry.answer!);
        }, fate.holdMs);
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
    this.base = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this.base;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
