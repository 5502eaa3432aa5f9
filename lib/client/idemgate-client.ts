import { IdemgateApiError, NETWORK_PROBLEM_TYPE, OUTCOME_UNKNOWN_PROBLEM_TYPE, OutcomeUnknownError, TIMEOUT_PROBLEM_TYPE, TOOL_PAUSED_PROBLEM_TYPE, ToolPausedError, type Problem } from "./errors";
import { guard, idempotent, type DoneAnswer, type GuardOptions } from "./guard";
import { PendingSettles, type PendingSettle } from "./pending-settles";
import { RETRIED_PROBLEM_TYPES } from "./problem-types";
import { ClientReplayCache, replayDeadlineMs, type ReplayCacheOptions } from "./replay-cache";
import { ReplayReporter } from "./replay-reports";
import { Resolver, type Probe, type ResolverOptions } from "./resolver";
import { DEFAULT_RETRY, parseRetryAfterMs, retryDelayMs, sleep, type RetryOptions } from "./retry";
import { defaultTransport, fetchTransport, type Transport, type WireResponse } from "./transport";

/** A tool as GET /api/v1/tools lists it. */
export interface ToolDescription {
  name: string;
  kind: "read" | "write";
  description: string;
  ttlMs: number;
  leaseMs: number;
  stuckPolicy: "block" | "takeover";
  fallbackTtlMs: number | null;
  idempotencyKey: "required" | "optional" | "unused";
  /** where it runs: in Idemgate, at an HTTP service or a guarded MCP server it forwards to, or in the caller's process (guard it) */
  source: "in_process" | "upstream" | "client" | "mcp";
  argumentsSchema: Record<string, unknown>;
  resultSchema: Record<string, unknown> | null;
  /**
   * set while the tool is paused: its new calls are refused (ToolPausedError) and nothing runs; done
   * keys still replay. Null when it is not; absent from servers of earlier versions.
   */
  paused?: { reason: string; pausedAt: string | null; source: "operator" | "config" } | null;
}

export interface IdemgateClientOptions {
  /** where the gateway is served, e.g. http://127.0.0.1:3000 */
  baseUrl: string;
  /** an API token (`idg_…`); it decides the scope keys live in */
  token: string;
  /** default Idemgate-Session: the caller's run or conversation */
  session?: string;
  /**
   * per request, not per call (default 30 s). A request that times out is retried with the same key:
   * the gateway answers it with the first request's outcome (a conflict while it still runs, then
   * its stored result, or outcome_unknown), never with a second execution.
   */
  timeoutMs?: number;
  /**
   * `Prefer: wait=N` sent with every keyed call (default 10 s; 0 sends none): a retry that meets
   * its first attempt still running is held by the gateway until that attempt ends and gets its
   * result, instead of a 409 to wait out. Keep it below `timeoutMs`.
   */
  waitSeconds?: number;
  retry?: Partial<RetryOptions>;
  /**
   * sends the requests through this fetch. Without it: in Node, node:http(s) on keep-alive
   * connections of the client's own (cheaper per request than Node's fetch); elsewhere, fetch.
   */
  fetch?: typeof fetch;
  /** backoff jitter source (tests make it deterministic) */
  random?: () => number;
  /** observes every HTTP request a call sends (metrics, simulators) */
  onAttempt?: (event: AttemptEvent) => void;
  /**
   * guard() and idempotent() keep the done results they get (a replay, or their own completion) and
   * answer the same call again (the same tool, key and arguments, as JSON text: another key order is
   * another call) from memory, without a request, until the result's TTL ends by the gateway's
   * count, less a margin. A done result never changes before it expires, so the answer is the one
   * the gateway would give. Each such replay is still reported to the gateway's audit log (in
   * batches, in the background: see flush()). Default on, 1,000 entries; false turns it off.
   */
  replayCache?: ReplayCacheOptions | false;
  /** a monotonic clock in milliseconds for the replay cache's deadlines (default performance.now; tests move it) */
  clock?: () => number;
  /**
   * guard() sends a completion (or a release) it could not deliver again in the background, with
   * the same token, until the gateway takes it. When such a settle is still pending as a Node
   * process is about to exit normally (the `beforeExit` event), the exit waits up to this long for
   * it to be delivered, and says so on the console (default 10 s; 0: no such wait, the process
   * exits at once and the key turns stuck after its lease). close() and flush() wait for them too.
   */
  flushOnExitMs?: number;
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
  /** overrides the client's `waitSeconds` for this call */
  waitSeconds?: number;
  /**
   * who minted the key: "orchestrator" (default; authoritative) or "model" (advisory: the gateway
   * also answers an identical call within the tool's arguments window as a duplicate)
   */
  keySource?: "orchestrator" | "model";
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

/** How long a normal exit (and flush(), close()) waits for settles not delivered yet, by default. */
export const DEFAULT_FLUSH_ON_EXIT_MS = 10_000;

/** `Prefer: wait` sent by default: well inside the default request timeout of 30 s. */
export const DEFAULT_WAIT_SECONDS = 10;

/** result: returned; problem, outcome_unknown: thrown; retry: sent again with the same key */
type Verdict = "result" | "retry" | "problem" | "outcome_unknown";

/**
 * Gateway problems a retry with the same key may get past (generated from the server's problem table:
 * problem-types.ts). Nothing in them ran the side effect, or the gateway still holds the key, so the
 * retry cannot run it a second time:
 * - conflict (409): a call with this key is still running; wait for `Retry-After`;
 * - unavailable (503): the key store or the audit log was down; nothing ran;
 * - tool_failed (502): the tool said nothing happened; the key was released;
 * - internal (500): the gateway failed unexpectedly; the retry is answered from whatever state the
 *   key was left in (a reservation that stayed is a conflict, then stuck).
 */
const RETRY_PROBLEMS = RETRIED_PROBLEM_TYPES;

const GATEWAY_PROBLEM = /^\/problems\/[a-z_]+$/;
const GATEWAY_HEADERS = ["idempotency-key", "idemgate-execution-id", "idempotent-replayed"];

function isProblem(contentType: string | null): boolean {
  return contentType?.toLowerCase().startsWith("application/problem+json") ?? false;
}

function isJson(contentType: string | null): boolean {
  return /^application\/([\w.+-]+\+)?json/i.test(contentType ?? "");
}

/**
 * What one answer means for the call (the retry rules of IdemgateClient):
 * - `/problems/outcome_unknown` (502, 504, 409): final, thrown as OutcomeUnknownError;
 * - RETRY_PROBLEMS: retried with the same key;
 * - every other gateway problem is final: stuck (409) and abandoned (500) keys stay reserved until
 *   an operator decides, a mismatch (422) or any other 4xx would fail the same way again;
 * - a 5xx that is not the gateway's (no gateway problem type and none of its headers: a proxy or
 *   load balancer in front of it): retried with the same key, which the gateway behind it holds;
 * - anything else is the tool's answer (any status, a declined card's 402 included): returned.
 */
function verdictFor(response: WireResponse, problem: Problem | null): Verdict {
  const gatewayProblem = problem !== null && GATEWAY_PROBLEM.test(problem.type);
  if (gatewayProblem) {
    if (problem.type === OUTCOME_UNKNOWN_PROBLEM_TYPE) return "outcome_unknown";
    return RETRY_PROBLEMS.has(problem.type) ? "retry" : "problem";
  }
  if (response.status >= 500 && !GATEWAY_HEADERS.some((name) => response.headers.has(name))) return "retry";
  return problem ? "problem" : "result";
}

function asProblem(body: unknown, response: WireResponse): Problem {
  if (body && typeof body === "object" && typeof (body as Problem).type === "string" && typeof (body as Problem).title === "string") {
    return { ...(body as Problem), status: typeof (body as Problem).status === "number" ? (body as Problem).status : response.status };
  }
  return { type: "about:blank", title: response.statusText || `HTTP ${response.status}`, status: response.status };
}

async function readBody(response: WireResponse): Promise<unknown> {
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
 * A typed client for the Idemgate gateway, for Node 20 and browsers: requests go over node:http(s)
 * keep-alive connections in Node and over fetch elsewhere (or through the `fetch` it is given).
 * One invoke() call is one logical action: every retry it makes reuses that action's key.
 *
 * Retry rules. The gateway holds the key of every write, so a retry with the same key can never run
 * the side effect a second time: it gets the first call's stored result, a conflict while that call
 * runs, or the answer that the outcome is unknown. The client therefore retries (same key, capped
 * exponential backoff, `Retry-After` honoured up to `maxRetryAfterMs`, at most `maxAttempts`
 * requests) what a retry can get past, and stops at what only a person or the tool can settle:
 *
 * | answer | meaning | client |
 * |---|---|---|
 * | the tool's answer (any status: 200, a replay, a declined card's 402) | done | returned |
 * | 502/504/409 `/problems/outcome_unknown` | may have happened; the key is held | thrown as OutcomeUnknownError, never retried |
 * | 409 `/problems/stuck`, 500 `/problems/abandoned` | the key stays reserved; an operator decides | thrown, not retried |
 * | 422 `/problems/mismatch`, other 4xx problems | the same call would fail the same way | thrown, not retried |
 * | 409 `/problems/conflict` | a call with this key is still running | retried after `Retry-After` |
 * | 502 `/problems/tool_failed` | the tool said nothing happened; the key was released | retried |
 * | 503 `/problems/unavailable` | key store or audit log down; nothing ran | retried |
 * | 500 `/problems/internal` | the gateway failed unexpectedly | retried |
 * | a 5xx without a gateway problem type or gateway headers | a proxy or load balancer in front of the gateway | retried |
 * | no answer: timeout, refused or broken connection | the call may still be running | retried |
 *
 * When the retries run out the last answer is thrown (IdemgateApiError; `status` 0 for a timeout or
 * a network error). Never retry an OutcomeUnknownError with a new key: that is a second action.
 */
export class IdemgateClient {
  private readonly baseUrl: string;
  private readonly token: string;
  private readonly session: string | undefined;
  private readonly waitSeconds: number;
  private readonly timeoutMs: number;
  private readonly retry: RetryOptions;
  /** the transport, or (until the first request loads it) null */
  private transport: Transport | null;
  private loading: Promise<Transport> | null = null;
  private readonly random: () => number;
  private readonly onAttempt: ((event: AttemptEvent) => void) | undefined;
  private readonly kinds = new Map<string, ToolDescription["kind"]>();
  private readonly replays: ClientReplayCache | null;
  private readonly clock: () => number;
  private readonly reporter: ReplayReporter;
  private readonly settles: PendingSettles;
  private readonly flushOnExitMs: number;
  private exitHooked = false;

  constructor(options: IdemgateClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.token = options.token;
    this.session = options.session;
    this.waitSeconds = options.waitSeconds ?? DEFAULT_WAIT_SECONDS;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.retry = { ...DEFAULT_RETRY, ...options.retry };
    this.transport = options.fetch ? fetchTransport(options.fetch) : null;
    this.random = options.random ?? Math.random;
    this.onAttempt = options.onAttempt;
    this.replays = options.replayCache === false ? null : new ClientReplayCache(options.replayCache ?? {});
    this.clock = options.clock ?? (() => performance.now());
    this.reporter = new ReplayReporter(async (body) => {
      await this.send("POST", "/api/v1/replays", "(replay reports)", null, { headers: { "Content-Type": "application/json" }, body, retry: { maxAttempts: 1 } });
    }, this.clock);
    this.flushOnExitMs = options.flushOnExitMs ?? DEFAULT_FLUSH_ON_EXIT_MS;
    this.settles = new PendingSettles(
      (settle) =>
        this.send("POST", `/api/v1/executions/${encodeURIComponent(settle.executionId)}/${settle.action}`, settle.tool, settle.key, {
          headers: { "Content-Type": "application/json" },
          body: settle.body,
          retry: { maxAttempts: 1 },
        }),
      this.random,
    );
  }

  /**
   * Sends what the client still has to deliver: the reports of replays answered from the replay
   * cache (they go on their own every 250 ms or 100 replays), and guard()'s completions and
   * releases that could not be delivered yet (sent again now, then at most a second apart). Resolves
   * once the reports are delivered or given up on and the settles are delivered, refused, or
   * `timeoutMs` (default 10 s) has passed; those still pending go on in the background.
   */
  async flush(options: { timeoutMs?: number } = {}): Promise<void> {
    await Promise.all([this.reporter.flush(), this.settles.flush(options.timeoutMs ?? DEFAULT_FLUSH_ON_EXIT_MS)]);
  }

  /**
   * flush(), then every settle still undelivered is reported to its guard()'s `onWarning` as not
   * stored (its key stays held, stuck after its lease, until an operator decides). The client holds
   * no other resource that needs closing (idle connections close on their own).
   */
  async close(options: { timeoutMs?: number } = {}): Promise<void> {
    await this.flush(options);
    this.settles.abandonAll("the client was closed before the gateway could be reached");
  }

  /**
   * Starts resolving the held calls (unknown, or stuck after a crash) of tools that run in this
   * process: every few seconds their calls are listed, each is claimed (one process at a time), its
   * tool's probe asked, and its answer sent (applied: the key is done with the result; not applied:
   * freed; null or a failure: asked again later). Start it once per process, in as many processes
   * as you like; `resolver.stop()` ends it.
   */
  startResolver(probes: Readonly<Record<string, Probe>>, options: ResolverOptions = {}): Resolver {
    return new Resolver(this, probes, options);
  }

  /** guard()'s completions and releases not delivered yet: sent again in the background. */
  get pendingSettles(): number {
    return this.settles.size;
  }

  /** @internal guard() hands over a settle it could not deliver: sent again in the background with the same token */
  deliverLater(settle: PendingSettle): void {
    this.settles.add(settle);
    this.flushBeforeExit();
  }

  /**
   * In Node, once per pending batch: when the process is about to exit normally with settles still
   * undelivered, it waits (bounded by `flushOnExitMs`) until they are delivered, and says so.
   */
  private flushBeforeExit(): void {
    const proc = (globalThis as { process?: { once?: (event: "beforeExit", listener: () => void) => unknown } }).process;
    if (this.exitHooked || this.flushOnExitMs <= 0 || typeof proc?.once !== "function") return;
    this.exitHooked = true;
    proc.once("beforeExit", () => {
      this.exitHooked = false;
      const pending = this.settles.size;
      if (pending === 0) return;
      console.warn(`idemgate: ${pending} guarded result(s) or release(s) not delivered yet: sending them before the process exits (at most ${this.flushOnExitMs} ms)`);
      void this.settles.flush(this.flushOnExitMs).then((left) => {
        if (left === 0) console.warn("idemgate: delivered; the process exits");
        else this.settles.abandonAll(`the process exits after ${this.flushOnExitMs} ms without reaching the gateway`);
      });
    });
  }

  /** Replays answered from the cache whose reports could not be delivered (after retries) and were dropped. */
  get droppedReplayReports(): number {
    return this.reporter.dropped;
  }

  /** @internal guard()'s lookup: the cached done answer to this call, its replay queued for the audit log */
  cachedReplay(tool: string, key: string, argumentsText: string, session: string | undefined): { status: number; body: string } | null {
    if (this.replays === null) return null;
    const now = this.clock();
    const hit = this.replays.get(tool, key, argumentsText, now);
    if (hit === null) return null;
    this.reporter.add({ tool, key, executionId: hit.executionId, hitMs: now, ...(session ? { session } : {}) });
    return hit;
  }

  /** @internal guard() keeps a done answer of this exact call when the gateway said how long it holds */
  keepReplay(tool: string, key: string, argumentsText: string, answer: DoneAnswer): void {
    if (this.replays === null || typeof answer.expiresInMs !== "number" || typeof answer.executionId !== "string") return;
    const now = this.clock();
    const entry = { status: answer.status, body: JSON.stringify(answer.body ?? null), executionId: answer.executionId, deadlineMs: replayDeadlineMs(now, answer.expiresInMs) };
    this.replays.set(tool, key, argumentsText, entry, now);
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
   * POST /api/v1/tools/{tool}/invoke, retried with the same key by the rules on IdemgateClient.
   * Returns the tool's answer (fresh or replayed, a final error such as a 402 included). Throws
   * OutcomeUnknownError (a subclass of IdemgateApiError, carrying `key` and `executionId`) when the
   * action may have happened and the gateway holds the key, and IdemgateApiError when the gateway
   * refused the call or the retries ran out.
   */
  async invoke<T = unknown>(tool: string, args: unknown = {}, options: InvokeOptions = {}): Promise<InvokeResult<T>> {
    const wanted = options.key === undefined ? "auto" : options.key;
    const key = wanted === "auto" ? (this.kinds.get(tool) === "read" ? null : newKey()) : wanted;
    const headers: Record<string, string> = { "Content-Type": "application/json" };
    if (key !== null) {
      // a key holding a "," goes as a quoted string: bare, it would read as the header sent twice
      headers["Idempotency-Key"] = key.includes(",") ? `"${key.replace(/[\\"]/g, "\\$&")}"` : key;
      const wait = Math.floor(options.waitSeconds ?? this.waitSeconds);
      if (wait > 0) headers.Prefer = `wait=${wait}`;
      if (options.keySource) headers["Idemgate-Key-Source"] = options.keySource;
    }
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

  /**
   * Runs `fn`, a tool that runs in this process (`runs: client`), at most once per key: see guard()
   * in guard.ts for the four outcomes and what each returns or throws.
   */
  guard<T>(tool: string, args: unknown, fn: () => Promise<T> | T, options: GuardOptions): Promise<T> {
    return guard(this, tool, args, fn, options);
  }

  /** `fn` guarded on every call, its key made from its arguments by `options.key`. */
  idempotent<A, T>(tool: string, fn: (args: A) => Promise<T> | T, options: Omit<GuardOptions, "key"> & { key: (args: A) => string }): (args: A) => Promise<T> {
    return idempotent(this, tool, fn, options);
  }

  /** @internal one API call with the retry rules above (guard() uses it for the reservation API) */
  async send<T>(
    method: "GET" | "POST",
    path: string,
    tool: string,
    key: string | null,
    request: { headers: Record<string, string>; body: string | undefined; signal?: AbortSignal; timeoutMs?: number; retry?: Partial<RetryOptions> },
  ): Promise<InvokeResult<T>> {
    const retry = { ...this.retry, ...request.retry };
    const timeoutMs = request.timeoutMs ?? this.timeoutMs;
    const headers = { Accept: "application/json, application/problem+json", Authorization: `Bearer ${this.token}`, ...request.headers };
    const transport = this.transport ?? (this.transport = await (this.loading ??= defaultTransport()));
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
      let response: WireResponse;
      let body: unknown;
      // The abort settles the attempt even if the fetch implementation misses it (seen with undici
      // under connection churn: an aborted fetch that never settled).
      const aborted = new Promise<never>((_, reject) => signal.addEventListener("abort", () => reject(signal.reason), { once: true }));
      aborted.catch(() => {});
      try {
        response = await Promise.race([transport(this.baseUrl + path, { method, headers, body: request.body, signal }), aborted]);
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
      const verdict = verdictFor(response, problem);
      const replayed = response.headers.get("idempotent-replayed") === "true";
      const retryAfterMs = parseRetryAfterMs(response.headers.get("retry-after"), Date.now());
      const delay = verdict === "retry" && !last ? retryDelayMs(attempt, retryAfterMs, retry, this.random) : null;
      report({ outcome: "response", status: response.status, problemType: problem?.type, replayed, retryInMs: delay });
      if (delay !== null) {
        await sleep(delay, request.signal);
        continue;
      }
      if (verdict === "result") {
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
      if (verdict === "outcome_unknown" && problem) {
        const heldKey = typeof problem.key === "string" ? problem.key : (response.headers.get("idempotency-key") ?? key);
        const executionId = typeof problem.executionId === "string" ? problem.executionId : response.headers.get("idemgate-execution-id");
        throw new OutcomeUnknownError(problem, heldKey, executionId, attempt);
      }
      if (problem?.type === TOOL_PAUSED_PROBLEM_TYPE) throw new ToolPausedError(problem, key, attempt);
      throw new IdemgateApiError(problem ?? asProblem(body, response), key, attempt);
    }
  }
}
