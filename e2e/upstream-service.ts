import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { upstreamPortOf } from "./upstream";

/**
 * What the service does with the next calls it gets:
 * - ok: applies the effect, answers 201;
 * - fail: applies nothing, answers 503 (the gateway still cannot know that nothing happened);
 * - fail_after_effect: applies the effect, then answers 503 (the gateway cannot know it happened);
 * - slow_after_effect: applies the effect, answers 201 after 2.5 s (past create_invoice's 1.5 s timeout);
 * - not_now: applies nothing, answers 429 (the gateway releases the key, a retry runs);
 * - reject: applies nothing, answers 400 (a final error, stored and replayed);
 * - hold: applies the effect, answers 201 only when `answerHeld()` is called (a call still running);
 * - pending_after_effect: applies the effect, answers 502 with JSON naming it (`{ id, status: "pending" }`),
 *   as a gateway in front of the service might: the outcome is unknown, the body a starting point.
 */
export type Behaviour = "ok" | "fail" | "fail_after_effect" | "slow_after_effect" | "not_now" | "reject" | "hold" | "pending_after_effect";

export interface Effect {
  path: string;
  /** the key the gateway forwarded (derived from the scope and the caller's key) */
  forwardedKey: string | undefined;
  /** the caller's own key, forwarded for correlation */
  callerKey: string | undefined;
  scope: string | undefined;
  body: string;
  result: unknown;
}

const header = (req: IncomingMessage, name: string) => (req.headers[name] as string | undefined) ?? undefined;

/**
 * The HTTP service behind the e2e servers' upstream tools (e2e/upstream.ts). It counts the side
 * effects it applies, so a test can say how many times an action really happened, and answers the
 * status probe (`GET /status`) from those effects.
 */
export class UpstreamService {
  behaviour: Behaviour = "ok";
  /** what `GET /status` says: the truth from the effects, or that it cannot tell */
  statusAnswers: "truth" | "unknown" = "truth";
  readonly effects: Effect[] = [];
  /** every POST received, effect or not */
  received = 0;
  private server: Server | null = null;
  private held: (() => void)[] = [];

  effectsOf(callerKey: string): number {
    return this.effects.filter((e) => e.callerKey === callerKey).length;
  }

  /** Answers every call held by the `hold` behaviour (201 with its result). */
  answerHeld(): void {
    for (const answer of this.held.splice(0)) answer();
  }

  /** Listens on the port of the configuration (the Playwright project) the tests run in. */
  async start(project: string): Promise<void> {
    const port = upstreamPortOf(project);
    this.server = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => this.handle(req, res, body));
    });
    await new Promise<void>((resolve) => this.server!.listen(port, "127.0.0.1", resolve));
  }

  async stop(): Promise<void> {
    this.answerHeld();
    const server = this.server;
    if (!server) return;
    this.server = null;
    // the gateway keeps its connections alive: close them, or close() waits for them
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private handle(req: IncomingMessage, res: ServerResponse, body: string): unknown {
    const json = (status: number, value: unknown) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(value));
    const path = new URL(req.url ?? "/", "http://service").pathname;
    const forwardedKey = header(req, "idempotency-key");

    if (req.method === "GET" && path === "/status") {
      if (this.statusAnswers === "unknown") return json(200, { outcome: "unknown" });
      const effect = this.effects.findLast((e) => forwardedKey !== undefined && e.forwardedKey === forwardedKey);
      return json(200, effect ? { outcome: "applied", status: 201, body: effect.result } : { outcome: "not_applied" });
    }

    this.received++;
    const behaviour = this.behaviour;
    if (behaviour === "fail") return res.writeHead(503).end("down for maintenance");
    if (behaviour === "not_now") return res.writeHead(429, { "retry-after": "1" }).end("slow down");
    if (behaviour === "reject") return json(400, { error: "unknown customer" });

    const result = { id: `${path === "/exports" ? "exp" : "inv"}_${this.effects.length + 1}` };
    this.effects.push({ path, forwardedKey, callerKey: header(req, "idemgate-key"), scope: header(req, "idemgate-scope"), body, result });
    switch (behaviour) {
      case "fail_after_effect":
        return res.writeHead(503).end("down for maintenance");
      case "pending_after_effect":
        return json(502, { ...result, status: "pending" });
      case "slow_after_effect":
        setTimeout(() => json(201, result), 2_500);
        return;
      case "hold":
        this.held.push(() => json(201, result));
        return;
      default:
        return json(201, result);
    }
  }
}
