import { IdemgateApiError, OutcomeUnknownError, type Problem } from "./errors";
import { deliverableLater, type PendingSettle } from "./pending-settles";
import type { RetryOptions } from "./retry";
import { runProbe, type Probe } from "./resolver";

/** What guard() needs of IdemgateClient: one API call with its retry rules. */
export interface ApiSender {
  send<T>(
    method: "GET" | "POST",
    path: string,
    tool: string,
    key: string | null,
    request: { headers: Record<string, string>; body: string | undefined; signal?: AbortSignal; retry?: Partial<RetryOptions> },
  ): Promise<{ status: number; body: T }>;
  /** the client's replay cache (IdemgateClient's `replayCache`): a done answer to this exact call, or null */
  cachedReplay?(tool: string, key: string, argumentsText: string, session: string | undefined): { status: number; body: string } | null;
  /** offers a done answer to this exact call to the replay cache */
  keepReplay?(tool: string, key: string, argumentsText: string, answer: DoneAnswer): void;
  /**
   * takes a completion or release that could not be delivered, and sends it again in the
   * background with the same token until the gateway takes it (IdemgateClient's); without it, such
   * a settle is given up with a warning
   */
  deliverLater?(settle: PendingSettle): void;
}

/**
 * Throw this from a guarded function when its side effect certainly did not happen (the payment SDK
 * refused before sending, a validation failed): the key is released and a retry runs the function.
 * Any other exception means the outcome is unknown and the key is held.
 */
export class NotAppliedError extends Error {
  constructor(message = "the action was not applied", options?: { cause?: unknown }) {
    super(message, options);
    this.name = "NotAppliedError";
  }
}

/** A stored final error (a status of 400–499) answered to a replay: the function did not run again. */
export class FinalResultError extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
    readonly key: string,
  ) {
    super(`the stored result of this action is a final error (${status})`);
    this.name = "FinalResultError";
  }
}

/** Something the caller should know that does not change what guard() returns or throws. */
export interface GuardWarning {
  /**
   * settle_pending: the result (or the release) could not be delivered yet and is sent again in the
   * background; result_not_stored: it could not be stored for good (refused, or the process exits
   * first), and the key stays held until an operator decides
   */
  kind: "heartbeat_refused" | "late_completion" | "result_not_stored" | "settle_pending";
  tool: string;
  key: string;
  executionId: string;
  message: string;
  cause?: unknown;
}

export interface GuardOptions {
  /** the Idempotency-Key naming this logical action: one per action, the same on every retry */
  key: string;
  session?: string;
  /** "model" when a model minted the key (advisory: also checked by the arguments) */
  keySource?: "orchestrator" | "model";
  /** `Prefer: wait=N` for a reservation meeting a running call (default: the client's) */
  waitSeconds?: number;
  /** told about refused heartbeats, late completions and results that could not be stored (default: console.warn) */
  onWarning?: (warning: GuardWarning) => void;
  signal?: AbortSignal;
  /**
   * asked once when the function throws an error that leaves its outcome unknown (a payment SDK
   * that timed out): applied stores its result (returned as the function's), not applied frees the
   * key (the error is rethrown), null or a failure leaves the key held as unknown. Its call's
   * `state` is "running" and its `scope` empty.
   */
  probe?: Probe;
  /** how long that probe may take (default 10 s) */
  probeTimeoutMs?: number;
}

interface Reserved {
  state: "reserved";
  executionId: string;
  token: number;
  leaseUntil: string;
  /** the rest of the lease by the server's clock when it answered */
  leaseMs?: number;
}

function isReserved(status: number, answer: unknown): answer is Reserved {
  const a = answer as Partial<Reserved> | null;
  return (
    status === 201 &&
    typeof a === "object" &&
    a !== null &&
    a.state === "reserved" &&
    typeof a.executionId === "string" &&
    a.executionId !== "" &&
    typeof a.token === "number" &&
    typeof a.leaseUntil === "string"
  );
}
/** A done answer (to a reservation, or to a completion): the stored result. */
export interface DoneAnswer {
  state: "done";
  status: number;
  body: unknown;
  /** the execution whose result it is (gateways before the client's replay cache leave it out) */
  executionId?: string;
  /**
   * how much longer this key replays this result by the gateway's clock; absent when the result is
   * not stored under this key (an advisory key answered by its arguments window) or from older gateways
   */
  expiresInMs?: number;
}

function isDone(status: number, answer: unknown): answer is DoneAnswer {
  const a = answer as Partial<DoneAnswer> | null;
  return status === 200 && typeof a === "object" && a !== null && a.state === "done" && typeof a.status === "number";
}

/** The status an error carries (`status` or `statusCode`, as HTTP client libraries set it). */
function errorStatus(err: unknown): number | null {
  if (typeof err !== "object" || err === null) return null;
  const e = err as { status?: unknown; statusCode?: unknown };
  const status = typeof e.status === "number" ? e.status : typeof e.statusCode === "number" ? e.statusCode : null;
  return status !== null && Number.isInteger(status) ? status : null;
}

/** Statuses that say a request was not acted on (as for upstream tools): the key is released. */
const NOT_APPLIED_STATUSES = new Set([408, 425, 429]);

/** A 4xx the function threw is its final answer (a declined card), stored and replayed; 408/425/429 are not. */
function finalStatus(err: unknown): number | null {
  const status = errorStatus(err);
  return status !== null && status >= 400 && status <= 499 && !NOT_APPLIED_STATUSES.has(status) ? status : null;
}

function errorBody(err: unknown): unknown {
  if (!(err instanceof Error)) return { error: String(err) };
  const e = err as Error & { code?: unknown; body?: unknown };
  return { error: { name: e.name, message: e.message, ...(typeof e.code === "string" ? { code: e.code } : {}), ...(e.body !== undefined ? { body: e.body } : {}) } };
}

function isNotApplied(err: unknown): boolean {
  if (err instanceof Error && err.name === "NotAppliedError") return true;
  const status = errorStatus(err);
  return status !== null && NOT_APPLIED_STATUSES.has(status);
}

const JSON_HEADERS = { "Content-Type": "application/json" };

/**
 * Runs `fn` at most once per (scope, key), with Idemgate as the key store, result store and audit
 * log: reserve the key; on a 201 run `fn` (heartbeating every third of the lease), then store its
 * result; on a replay return the stored result without running (a replay of a call the client has
 * seen done is answered from its replay cache, without a request: IdemgateClient's `replayCache`).
 * The four outcomes:
 * - done: `fn`'s result is stored and returned; every retry with the key gets it back (replay);
 * - final error: `fn` threw an error with a 4xx `status` but 408/425/429 (a declined card): stored as the result and
 *   rethrown; a retry gets FinalResultError with the stored status and body, without running;
 * - not applied: `fn` threw NotAppliedError (or an error with status 408, 425 or 429): the key is
 *   released and the error rethrown; a retry runs;
 * - unknown: `fn` threw anything else: the key is held as unknown and OutcomeUnknownError is thrown
 *   (the original error as its cause); no retry with this key runs `fn` again until a probe or an
 *   operator decides.
 * Its own API calls are retried with the same key (network errors, 503, a conflict while another
 * caller holds the key, with `Prefer: wait`).
 */
export async function guard<T>(client: ApiSender, tool: string, args: unknown, fn: () => Promise<T> | T, options: GuardOptions): Promise<T> {
  const key = options.key;
  const argumentsText = JSON.stringify({ arguments: args ?? {} });
  // an aborted call ends as its request would have, the abort reason thrown, cached or not
  options.signal?.throwIfAborted();
  const cached = client.cachedReplay?.(tool, key, argumentsText, options.session);
  if (cached) return replayed<T>(cached.status, JSON.parse(cached.body), key);

  const warn = options.onWarning ?? ((w: GuardWarning) => console.warn(`idemgate: ${w.tool} ${w.key}: ${w.message}`));
  const headers: Record<string, string> = { ...JSON_HEADERS, "Idempotency-Key": key.includes(",") ? `"${key.replace(/[\\"]/g, "\\$&")}"` : key };
  const wait = options.waitSeconds ?? 10;
  if (wait > 0) headers.Prefer = `wait=${Math.floor(wait)}`;
  if (options.session) headers["Idemgate-Session"] = options.session;
  if (options.keySource) headers["Idemgate-Key-Source"] = options.keySource;

  const reservation = await client.send<Reserved | DoneAnswer>("POST", `/api/v1/tools/${encodeURIComponent(tool)}/reservations`, tool, key, {
    headers,
    body: argumentsText,
    signal: options.signal,
  });
  const answer = reservation.body;
  if (isDone(reservation.status, answer)) {
    client.keepReplay?.(tool, key, argumentsText, answer);
    return replayed<T>(answer.status, answer.body, key);
  }
  // fn runs on a reservation and nothing else: any other answer (a proxy's error page, a server
  // without this API) leaves the call unrun, whatever its status
  if (!isReserved(reservation.status, answer)) {
    const problem: Problem = {
      type: "about:blank",
      title: "Unexpected answer to the reservation",
      status: reservation.status,
      detail: `the reservation of ${tool} was answered ${reservation.status} without a reservation or a stored result; the function did not run`,
    };
    throw new IdemgateApiError(problem, key, 1);
  }
  const { executionId, token } = answer;
  const started = Date.now();
  const settle = (action: "complete" | "release" | "heartbeat", body: Record<string, unknown>) =>
    client.send("POST", `/api/v1/executions/${encodeURIComponent(executionId)}/${action}`, tool, key, {
      headers: JSON_HEADERS,
      body: JSON.stringify({ token, ...body }),
      retry: action === "heartbeat" ? { maxAttempts: 1 } : undefined,
    });
  /**
   * A completion or release that failed where a later attempt may get through (the gateway
   * restarting, the network down): handed to the client to send again in the background with the
   * same token, the caller told at once. Returns false when it cannot be (a final refusal, or a
   * client without background delivery).
   */
  const later = (action: "complete" | "release", body: Record<string, unknown>, err: unknown, what: string, onDelivered?: (answer: { status: number; body: unknown }) => void): boolean => {
    if (!client.deliverLater || !deliverableLater(err)) return false;
    const reason = err instanceof Error ? err.message : String(err);
    client.deliverLater({
      tool,
      key,
      executionId,
      action,
      body: JSON.stringify({ token, ...body }),
      settled(outcome) {
        if ("answer" in outcome) return onDelivered?.(outcome.answer);
        const refused = outcome.refused;
        if (action === "complete" && refused instanceof IdemgateApiError && refused.code === "stale_token") {
          warn({ kind: "late_completion", tool, key, executionId, message: "the key was released or taken over before the result could be delivered: it is kept as a late completion for operators, not replayed", cause: refused });
          return;
        }
        warn({ kind: "result_not_stored", tool, key, executionId, message: `${what} was refused when it was sent again (${refused instanceof Error ? refused.message : String(refused)}); the key stays held until an operator decides`, cause: refused });
      },
      abandoned(message) {
        warn({ kind: "result_not_stored", tool, key, executionId, message: `${what} was not delivered: ${message}; the key stays reserved, stuck after its lease, until an operator decides`, cause: err });
      },
    });
    warn({ kind: "settle_pending", tool, key, executionId, message: `${what} could not be delivered yet (${reason}); it is sent again in the background with the same token until the gateway takes it`, cause: err });
    return true;
  };

  // heartbeats every third of the lease while fn runs; a 409 means the key is no longer ours: stop and say so
  const leaseMs = Math.max(300, typeof answer.leaseMs === "number" ? answer.leaseMs : Date.parse(answer.leaseUntil) - Date.now());
  let beating = true;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const beat = () => {
    timer = setTimeout(async () => {
      try {
        await settle("heartbeat", {});
      } catch (err) {
        // an answer that arrives after the call was settled (or the function ended) says nothing of this call any more
        if (!beating) return;
        if (err instanceof IdemgateApiError && err.status === 409) {
          beating = false;
          warn({ kind: "heartbeat_refused", tool, key, executionId, message: `the heartbeat was refused (${err.code ?? err.status}): the key is no longer held by this call; heartbeats stopped`, cause: err });
          return;
        }
        // a lost heartbeat: the next one may get through before the lease ends
      }
      if (beating) beat();
    }, Math.max(100, Math.floor(leaseMs / 3)));
  };
  beat();
  const stop = () => {
    beating = false;
    if (timer) clearTimeout(timer);
  };

  let value: T;
  try {
    value = await fn();
  } catch (err) {
    stop();
    if (isNotApplied(err)) {
      const release = { outcome: "not_run", note: String(err instanceof Error ? err.message : err).slice(0, 1000) };
      try {
        await settle("release", release);
      } catch (failed) {
        // the key is not freed until the gateway has the release: a retry meanwhile meets it held
        if (!later("release", release, failed, "the release (not run)")) throw failed;
      }
      throw err;
    }
    const status = finalStatus(err);
    if (status !== null) {
      await complete(status, errorBody(err));
      throw err;
    }
    const threw = `the guarded function threw: ${err instanceof Error ? err.message : String(err)}`;
    let probed: string | null = null;
    if (options.probe) {
      // the function's own process asks the tool's system at once, before the key is held as unknown
      const { answer: said, note: why } = await runProbe(
        options.probe,
        {
          executionId,
          tool,
          key,
          scope: "",
          state: "running",
          startedAt: new Date(started).toISOString(),
          leaseUntil: answer.leaseUntil,
          leaseEnded: false,
          note: threw.slice(0, 1000),
          arguments: args ?? {},
        },
        options.probeTimeoutMs ?? 10_000,
      );
      if (said?.applied) {
        await complete(said.status ?? 200, said.result === undefined ? null : said.result);
        if ((said.status ?? 200) >= 400) throw err;
        return said.result as T;
      }
      if (said && !said.applied) {
        const release = { outcome: "not_run", note: `the probe found it not applied after: ${threw}`.slice(0, 1000) };
        try {
          await settle("release", release);
        } catch (failed) {
          if (!later("release", release, failed, "the release (not run)")) throw failed;
        }
        throw err;
      }
      probed = why;
    }
    const note = (probed ? `${threw}; the probe: ${probed}` : threw).slice(0, 1000);
    try {
      await settle("release", { outcome: "unknown", note });
    } catch (failed) {
      // not recorded as unknown yet: sent again in the background; meanwhile (or without it) the
      // reservation turns stuck after its lease, still held
      later("release", { outcome: "unknown", note }, failed, "the release (outcome unknown)");
    }
    const problem: Problem = { type: "/problems/outcome_unknown", title: "Outcome unknown: the key is held", status: 502, detail: note, key, executionId };
    const unknown = new OutcomeUnknownError(problem, key, executionId, 1);
    Object.defineProperty(unknown, "cause", { value: err });
    throw unknown;
  }
  stop();
  await complete(200, value === undefined ? null : value);
  return value;

  async function complete(status: number, body: unknown): Promise<void> {
    const kept = (done: { status: number; body: unknown }) => {
      if (isDone(done.status, done.body)) client.keepReplay?.(tool, key, argumentsText, done.body);
    };
    try {
      kept(await settle("complete", { status, body }));
    } catch (err) {
      if (err instanceof IdemgateApiError && err.code === "stale_token") {
        warn({ kind: "late_completion", tool, key, executionId, message: "the key was released or taken over while the function ran: its result is kept as a late completion for operators, not replayed", cause: err });
        return;
      }
      if (later("complete", { status, body }, err, "the result", kept)) return;
      warn({ kind: "result_not_stored", tool, key, executionId, message: `the result could not be stored (${err instanceof Error ? err.message : String(err)}); the key stays reserved and turns stuck after its lease`, cause: err });
    }
  }
}

/** A stored result answered to a replay: returned, or thrown as FinalResultError when it is a final error. */
function replayed<T>(status: number, body: unknown, key: string): T {
  if (status >= 400) throw new FinalResultError(status, body, key);
  return body as T;
}

/** A function guarded by guard() for every call, its key made from its arguments. */
export function idempotent<A, T>(
  client: ApiSender,
  tool: string,
  fn: (args: A) => Promise<T> | T,
  options: Omit<GuardOptions, "key"> & { key: (args: A) => string },
): (args: A) => Promise<T> {
  return (args: A) => guard(client, tool, args, () => fn(args), { ...options, key: options.key(args) });
}
