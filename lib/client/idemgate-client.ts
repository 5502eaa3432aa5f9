import type { ToolDescription } from "@/lib/tools/api-schemas";
import { IdemgateApiError, NETWORK_PROBLEM_TYPE, TIMEOUT_PROBLEM_TYPE, type Problem } from "./errors";
import { DEFAULT_RETRY, parseRetryAfterMs, retryDelayMs, sleep, type RetryOptions } from "./retry";

export type { ToolDescription };

export interface IdemgateClientOptions {
  /** where the gateway is served, e.g. http://127.0.0.1:3000 */
  baseUrl: string;
  /** an API token (`idg_…`); it decides the scope keys live in */
  token: string;
  /** default Idemgate-Session: the caller's run or conversation */
  session?: string;
  /** per request, not per call: a call that times out is retried with the same key (default 30 s) */
  timeoutMs?: number;
  retry?: Partial<RetryOptions>;
  fetch?: typeof fetch;
  /** backoff jitter source (tests make it deterministic) */
  random?: () => number;
  /** observes every HTTP request a call sends (metrics, simulators) */
  onAttempt?: (event: AttemptEvent) => void;
}

export interface InvokeOptions {
  /**
   * The Idempotency-Key naming this logical action. "auto" (the default) mints one random key per
   * invoke() call, reused by all its retries, and sends none to tools known to be reads; null sends
   * none (tools with fallback dedupe accept that).
   */
  key?: string | "auto" | null;
  session?: string | null;
  timeoutMs?: number;
  retry?: Partial<RetryOptions>;
  /** cancels the call, retries included; the abort reason is thrown as is */
  signal?: AbortSignal;
}

export interface InvokeResult<T = unknown> {
  status: number;
  /** the tool's result (or its final error, e.g. a declined card), parsed as JSON when it is JSON */
  body: T;
  /** the gateway answered from a stored result: the side effect did not run again */
  replayed: boolean;
  /** the key the gateway filed the call under (a `fallback:` key for keyless calls), null for reads */
  key: string | null;
  /** HTTP requests sent for this call, the first included */
  attempts: number;
  /** set when this answer came from a fresh execution */
  executionId: string | null;
  headers: Headers;
}

export interface AttemptEvent {
  tool: string;
  key: string | null;
  attempt: number;
  outcome: "response" | "timeout" | "network_error";
  status?: number;
  /** the problem type of a problem+json answer */
  problemType?: string;
  replayed?: boolean;
  elapsedMs: number;
  /** the wait before the next attempt; null when this attempt ends the call */
  retryInMs: number | null;
}

type Verdict = { kind: "final" } | { kind: "retry"; retryAfterMs: number | null } | { kind: "problem" };

const NO_RETRY_409 = new Set(["/problems/stuck", "/problems/invalid_state"]);
const RETRY_5XX = new Set([500, 502, 503, 504]);

function isProblem(contentType: string | null): boolean {
  return contentType?.toLowerCase().startsWith("application/problem+json") ?? false;
}

function isJson(contentType: string | null): boolean {
  return /^application\/([\w.+-]+\+)?json/i.test(contentType ?? "");
}

/**
 * Gateway problems are retried when waiting can help: a call still running under the key (409
 * conflict) and server-side failures (5xx; the key was released or is still reserved, so the same
 * key is safe). A stuck key needs an operator, and every other 4xx would fail the same way again.
 * A tool's own answer (application/json, any status) is final.
 */
function verdictFor(response: Response, problem: Problem | null, nowMs: number): Verdict {
  const retryAfterMs = parseRetryAfterMs(response.headers.get("retry-after"), nowMs);
  if (problem) {
    if (response.status === 409 && !NO_RETRY_409.has(problem.type)) return { kind: "retry", retryAfterMs };
    if (RETRY_5XX.has(response.status)) return { kind: "retry", retryAfterMs };
    return { kind: "problem" };
  }
  // A proxy's or framework's error page in front of the gateway: not a tool result.
  if (RETRY_5XX.has(response.status) && !isJson(response.headers.get("content-type"))) return { kind: "retry", retryAfterMs };
  return { kind: "final" };
}

function asProblem(body: unknown, response: Response): Problem {
  if (body && typeof body === "object" && typeof (body as Problem).type === "string" && typeof (body as Problem).title === "string") {
    return { ...(body as Problem), status: typeof (body as Problem).status === "number" ? (body as Problem).status : response.status };
  }
  return { type: "about:blank", title: response.statusText || `HTTP ${response.status}`, status: response.status };
}

async function readBody(response: Response): Promise<unknown> {
  const text = await response.text();
  if (text === "") return null;
  if (!isJson(response.headers.get("content-type"))) return text;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function newKey(): string {
  return globalThis.crypto.randomUUID();
}

/**
 * A typed client for the Idemgate gateway: fetch only, so it runs in Node 20 and in browsers.
 * One invoke() call is one logical action: every retry it makes reuses that action's key.
 */
export class IdemgateClient {
  private readonly baseUrl: string;
  private readonly token: string;
  private readonly session: string | undefined;
  private readonly timeoutMs: number;
  private readonly retry: RetryOptions;
  private readonly fetchImpl: typeof fetch;
  private readonly random: () => number;
  private readonly onAttempt: ((event: AttemptEvent) => void) | undefined;
  private readonly kinds = new Map<string, ToolDescription["kind"]>();

  constructor(options: IdemgateClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.token = options.token;
    this.session = options.session;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.retry = { ...DEFAULT_RETRY, ...options.retry };
    this.fetchImpl = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.random = options.random ?? Math.random;
    this.onAttempt = options.onAttempt;
  }

  /** GET /api/v1/tools. Also teaches the client which tools are reads (they get no key). */
  async listTools(options: { signal?: AbortSignal } = {}): Promise<ToolDescription[]> {
    const result = await this.send<{ tools: ToolDescription[] }>("GET", "/api/v1/tools", "(list tools)", null, {
      headers: {},
      body: undefined,
      signal: options.signal,
    });
    for (const tool of result.body.tools) this.kinds.set(tool.name, tool.kind);
    return result.body.tools;
  }

  /**
   * POST /api/v1/tools/{tool}/invoke. Returns the tool's answer (fresh or replayed, a final error
   * such as a 402 included); throws IdemgateApiError when the gateway refused the call or the
   * retries ran out.
   */
  async invoke<T = unknown>(tool: string, args: unknown = {}, options: InvokeOptions = {}): Promise<InvokeResult<T>> {
    const wanted = options.key === undefined ? "auto" : options.key;
    const key = wanted === "auto" ? (this.kinds.get(tool) === "read" ? null : newKey()) : wanted;
    const headers: Record<string, string> = { "Content-Type": "application/json" };
    if (key !== null) headers["Idempotency-Key"] = key;
    const session = options.session === undefined ? this.session : options.session;
    if (session) headers["Idemgate-Session"] = session;
    return this.send<T>("POST", `/api/v1/tools/${encodeURIComponent(tool)}/invoke`, tool, key, {
      headers,
      body: JSON.stringify(args ?? {}),
      signal: options.signal,
      timeoutMs: options.timeoutMs,
      retry: options.retry,
    });
  }

  private async send<T>(
    method: "GET" | "POST",
    path: string,
    tool: string,
    key: string | null,
    request: { headers: Record<string, string>; body: string | undefined; signal?: AbortSignal; timeoutMs?: number; retry?: Partial<RetryOptions> },
  ): Promise<InvokeResult<T>> {
    const retry = { ...this.retry, ...request.retry };
    const timeoutMs = request.timeoutMs ?? this.timeoutMs;
    const headers = { Accept: "application/json, application/problem+json", Authorization: `Bearer ${this.token}`, ...request.headers };
    for (let attempt = 1; ; attempt++) {
      const started = Date.now();
      const last = attempt >= retry.maxAttempts;
      const report = (event: Omit<AttemptEvent, "tool" | "key" | "attempt" | "elapsedMs">) =>
        this.onAttempt?.({ tool, key, attempt, elapsedMs: Date.now() - started, ...event });
      // A timer of our own rather than AbortSignal.timeout: the controller stays referenced until the
      // attempt ends, so the abort always fires (a collected timeout signal left a fetch hanging).
      const timeout = new AbortController();
      const timer = setTimeout(() => timeout.abort(new DOMException(`no answer within ${timeoutMs} ms`, "TimeoutError")), timeoutMs);
      const signal = request.signal ? AbortSignal.any([request.signal, timeout.signal]) : timeout.signal;
      let response: Response;
      let body: unknown;
      // The abort settles the attempt even if the fetch implementation misses it (seen with undici
      // under connection churn: an aborted fetch that never settled).
      const aborted = new Promise<never>((_, reject) => signal.addEventListener("abort", () => reject(signal.reason), { once: true }));
      aborted.catch(() => {});
      try {
        response = await Promise.race([this.fetchImpl(this.baseUrl + path, { method, headers, body: request.body, signal }), aborted]);
        body = await Promise.race([readBody(response), aborted]);
        clearTimeout(timer);
      } catch (err) {
        clearTimeout(timer);
        if (request.signal?.aborted) throw request.signal.reason;
        const timedOut = timeout.signal.aborted;
        const delay = last ? null : retryDelayMs(attempt, null, retry, this.random);
        report({ outcome: timedOut ? "timeout" : "network_error", retryInMs: delay });
        if (delay === null) {
          const problem: Problem = timedOut
            ? { type: TIMEOUT_PROBLEM_TYPE, title: "Timed out", status: 0, detail: `no answer from ${this.baseUrl} within ${timeoutMs} ms` }
            : { type: NETWORK_PROBLEM_TYPE, title: "Network error", status: 0, detail: `${this.baseUrl}: ${(err as Error).message}` };
          throw new IdemgateApiError(problem, key, attempt, { cause: err });
        }
        await sleep(delay, request.signal);
        continue;
      }
      const problem = isProblem(response.headers.get("content-type")) ? asProblem(body, response) : null;
      const verdict = verdictFor(response, problem, Date.now());
      const replayed = response.headers.get("idempotent-replayed") === "true";
      const delay = verdict.kind === "retry" && !last ? retryDelayMs(attempt, verdict.retryAfterMs, retry, this.random) : null;
      report({ outcome: "response", status: response.status, problemType: problem?.type, replayed, retryInMs: delay });
      if (delay !== null) {
        await sleep(delay, request.signal);
        continue;
      }
      if (verdict.kind === "final") {
        return {
          status: response.status,
          body: body as T,
          replayed,
          key: response.headers.get("idempotency-key") ?? key,
          attempts: attempt,
          executionId: response.headers.get("idemgate-execution-id"),
          headers: response.headers,
        };
      }
      throw new IdemgateApiError(problem ?? asProblem(body, response), key, attempt);
    }
  }
}
