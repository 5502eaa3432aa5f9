import { IdemgateApiError } from "./errors";

/** What the resolver needs of IdemgateClient: one API call with its retry rules. */
export interface ResolverSender {
  send<T>(method: "GET" | "POST", path: string, tool: string, key: string | null, request: { headers: Record<string, string>; body: string | undefined }): Promise<{ status: number; body: T }>;
}

/** A held call of a tool that runs in this process, as a probe gets it (GET /api/v1/tools/{tool}/held). */
export interface HeldCall {
  executionId: string;
  tool: string;
  key: string;
  /** the API token's scope; empty for guard()'s own probe, which is not told it */
  scope: string;
  /** unknown: the call ended without knowing; stuck: its process never reported (crashed) and its lease passed; running: guard()'s own call, just failed */
  state: "unknown" | "stuck" | "running";
  startedAt: string;
  leaseUntil: string | null;
  /** false: the call may still be running somewhere, so "not applied" is refused until its lease ends */
  leaseEnded: boolean;
  /** why its outcome is unknown */
  note: string | null;
  /** its arguments as the tool keeps them for operators (redacted or in full); null when none are kept */
  arguments: unknown;
  argumentsKept?: string | null;
  probe?: { attempts: number; claimedUntil: string | null; nextProbeAt: string | null; lastNote: string | null };
}

/**
 * A probe's answer: the call's effect happened (`result` is stored as its result, and every retry
 * replays it; `status` 400–499 stores a final error), it did not (the key is freed; the next retry
 * runs), or null: cannot tell yet (asked again later, with backoff).
 */
export type ProbeAnswer<T = unknown> = { applied: true; result: T; status?: number } | { applied: false } | null;

/** Asks the tool's own system (the payment provider, the mail service) whether a held call happened. */
export type Probe = (call: HeldCall, context: { signal: AbortSignal }) => Promise<ProbeAnswer> | ProbeAnswer;

export interface ResolverOptions {
  /** names this process in the audit trail (default `<hostname>:<pid>` in Node) */
  holder?: string;
  /** how often the held calls are listed when there is nothing due sooner (default 5 s) */
  intervalMs?: number;
  /** a probe that takes longer counts as "cannot tell" (default 10 s) */
  probeTimeoutMs?: number;
  /** how long a claim lasts on the server (default 30 s; above probeTimeoutMs) */
  claimMs?: number;
  /** probes running at once (default 4) */
  concurrency?: number;
  /** told of every answer the gateway took */
  onDecision?: (event: ResolverDecision) => void;
  /** told of failures talking to the gateway (default: console.warn); the resolver keeps going */
  onError?: (error: unknown) => void;
}

export interface ResolverDecision {
  call: HeldCall;
  /** what the probe said */
  answer: "applied" | "not_applied" | "unknown";
  /** what the gateway did: resolved (done), released, none (still held), or skipped (decided meanwhile: kept as a late answer) */
  decision: "resolved" | "released" | "none" | "late";
}

interface HeldPage {
  items: HeldCall[];
  nextCursor: string | null;
}

interface ClaimAnswer {
  claim: string;
  call: HeldCall;
}

const DEFAULT_INTERVAL_MS = 5_000;
const DEFAULT_PROBE_TIMEOUT_MS = 10_000;
const DEFAULT_CLAIM_MS = 30_000;
/** the shortest pause between two sweeps, and the backoff bounds after the gateway could not be reached */
const MIN_PAUSE_MS = 200;
const ERROR_BACKOFF_MS = [1_000, 2_000, 5_000, 10_000, 30_000];
const JSON_HEADERS = { "Content-Type": "application/json" };

function defaultHolder(): string {
  const proc = (globalThis as { process?: { pid?: number; env?: Record<string, string | undefined> } }).process;
  const host = proc?.env?.HOSTNAME ?? "client";
  return proc?.pid ? `${host}:${proc.pid}` : host;
}

/** Runs a probe once, bounded by `timeoutMs`: a probe that throws, hangs or answers nonsense cannot tell. */
export async function runProbe(probe: Probe, call: HeldCall, timeoutMs: number): Promise<{ answer: ProbeAnswer; note: string | null }> {
  const controller = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<{ answer: ProbeAnswer; note: string }>((resolve) => {
    timer = setTimeout(() => {
      controller.abort(new Error(`the probe did not answer within ${timeoutMs} ms`));
      resolve({ answer: null, note: `the probe did not answer within ${timeoutMs} ms` });
    }, timeoutMs);
  });
  const asked = (async () => {
    try {
      const answer = await probe(call, { signal: controller.signal });
      return checked(answer);
    } catch (err) {
      return { answer: null, note: `the probe threw: ${err instanceof Error ? err.message : String(err)}`.slice(0, 1000) };
    }
  })();
  try {
    return await Promise.race([asked, timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

function checked(answer: unknown): { answer: ProbeAnswer; note: string | null } {
  if (answer === null || answer === undefined) return { answer: null, note: "the probe could not tell" };
  const a = answer as { applied?: unknown; result?: unknown; status?: unknown };
  if (a.applied === false) return { answer: { applied: false }, note: null };
  if (a.applied === true) {
    if (a.status !== undefined && (typeof a.status !== "number" || !Number.isInteger(a.status) || a.status < 200 || a.status > 499)) {
      return { answer: null, note: `the probe answered applied with status ${String(a.status)}, which is not a result (200 to 499)` };
    }
    return { answer: { applied: true, result: a.result === undefined ? null : a.result, ...(typeof a.status === "number" ? { status: a.status } : {}) }, note: null };
  }
  return { answer: null, note: "the probe's answer is neither { applied: true, result }, { applied: false } nor null" };
}

/**
 * Resolves the held calls of tools that run in this process by asking their probes. Started once
 * per process (IdemgateClient.startResolver); several processes may run one at once: each held
 * call is claimed on the gateway before it is probed, so one process asks about it at a time.
 */
export class Resolver {
  private readonly holder: string;
  private readonly intervalMs: number;
  private readonly probeTimeoutMs: number;
  private readonly claimMs: number;
  private readonly concurrency: number;
  private stopped = false;
  private wake: (() => void) | null = null;
  private readonly running: Promise<void>;
  private errors = 0;

  constructor(
    private readonly client: ResolverSender,
    private readonly probes: Readonly<Record<string, Probe>>,
    private readonly options: ResolverOptions = {},
  ) {
    for (const [tool, probe] of Object.entries(probes)) {
      if (typeof probe !== "function") throw new TypeError(`the probe for ${tool} is not a function`);
    }
    this.holder = (options.holder ?? defaultHolder()).slice(0, 200);
    this.intervalMs = options.intervalMs ?? DEFAULT_INTERVAL_MS;
    this.probeTimeoutMs = options.probeTimeoutMs ?? DEFAULT_PROBE_TIMEOUT_MS;
    this.claimMs = Math.min(300_000, Math.max(1_000, options.claimMs ?? Math.max(DEFAULT_CLAIM_MS, this.probeTimeoutMs + 5_000)));
    this.concurrency = Math.max(1, options.concurrency ?? 4);
    this.running = this.loop();
  }

  /** Ends the loop after the probes in progress have answered. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.running;
  }

  /** Starts the next sweep now instead of after the pause. */
  poke(): void {
    this.wake?.();
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      let pauseMs = this.intervalMs;
      try {
        const earliest = await this.sweep();
        this.errors = 0;
        if (earliest !== null) pauseMs = Math.min(pauseMs, Math.max(MIN_PAUSE_MS, earliest - Date.now()));
      } catch (err) {
        pauseMs = ERROR_BACKOFF_MS[Math.min(this.errors, ERROR_BACKOFF_MS.length - 1)];
        this.errors++;
        (this.options.onError ?? ((e) => console.warn(`idemgate resolver: ${e instanceof Error ? e.message : String(e)}`)))(err);
      }
      if (this.stopped) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, pauseMs);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = null;
    }
  }

  /** One pass over every tool's held calls; returns when the earliest call skipped for its backoff is due (epoch ms), or null. */
  private async sweep(): Promise<number | null> {
    let earliest: number | null = null;
    const due: { tool: string; call: HeldCall }[] = [];
    for (const tool of Object.keys(this.probes)) {
      let cursor: string | null = null;
      do {
        if (this.stopped) return null;
        const query: string = `limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
        const page: { body: HeldPage } = await this.client.send<HeldPage>("GET", `/api/v1/tools/${encodeURIComponent(tool)}/held?${query}`, tool, null, { headers: {}, body: undefined });
        for (const call of page.body.items) {
          const next = call.probe?.nextProbeAt ? Date.parse(call.probe.nextProbeAt) : NaN;
          if (Number.isFinite(next) && next > Date.now()) {
            earliest = earliest === null ? next : Math.min(earliest, next);
            continue;
          }
          due.push({ tool, call });
        }
        cursor = page.body.nextCursor;
      } while (cursor);
    }
    let index = 0;
    const worker = async () => {
      while (index < due.length && !this.stopped) {
        const { tool, call } = due[index++];
        try {
          await this.resolve(tool, call);
        } catch (err) {
          (this.options.onError ?? ((e) => console.warn(`idemgate resolver: ${e instanceof Error ? e.message : String(e)}`)))(err);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.concurrency, due.length) }, worker));
    return earliest;
  }

  /** Claims one call, probes it, answers. */
  private async resolve(tool: string, listed: HeldCall): Promise<"done" | "skipped"> {
    const base = `/api/v1/executions/${encodeURIComponent(listed.executionId)}/probe`;
    let claimed: ClaimAnswer;
    try {
      const answer = await this.client.send<ClaimAnswer>("POST", `${base}/claim`, tool, listed.key, {
        headers: JSON_HEADERS,
        body: JSON.stringify({ holder: this.holder, leaseMs: this.claimMs }),
      });
      claimed = answer.body;
    } catch (err) {
      // another process has it, or it was decided since it was listed
      if (err instanceof IdemgateApiError && (err.code === "probe_claimed" || err.code === "not_held" || err.code === "not_found")) return "skipped";
      throw err;
    }
    const call = claimed.call;
    const { answer, note } = await runProbe(this.probes[tool], call, this.probeTimeoutMs);
    const send = (body: Record<string, unknown>) =>
      this.client.send<{ decision: ResolverDecision["decision"] }>("POST", `${base}/answer`, tool, call.key, { headers: JSON_HEADERS, body: JSON.stringify({ claim: claimed.claim, ...body }) });
    const report = (said: ResolverDecision["answer"], decision: ResolverDecision["decision"]) => this.options.onDecision?.({ call, answer: said, decision });
    const unknown = async (why: string | null) => {
      const out = await send({ outcome: "unknown", ...(why ? { note: why.slice(0, 1000) } : {}) });
      report("unknown", out.body.decision);
      return "done" as const;
    };
    try {
      if (answer === null) return await unknown(note);
      if (answer.applied) {
        const out = await send({ outcome: "applied", body: answer.result ?? null, ...(answer.status !== undefined ? { status: answer.status } : {}) });
        report("applied", out.body.decision);
        return "done";
      }
      try {
        const out = await send({ outcome: "not_applied" });
        report("not_applied", out.body.decision);
        return "done";
      } catch (err) {
        // the call may still be running: not freed yet; asked again after its backoff
        if (err instanceof IdemgateApiError && err.code === "lease_running") return await unknown("the probe found nothing applied, but the call's lease has not ended yet");
        throw err;
      }
    } catch (err) {
      if (err instanceof IdemgateApiError && err.code === "not_held") {
        report(answer === null ? "unknown" : answer.applied ? "applied" : "not_applied", "late");
        return "skipped";
      }
      // the claim lapsed and another process claimed the call: it answers
      if (err instanceof IdemgateApiError && err.code === "probe_claimed") return "skipped";
      throw err;
    }
  }
}
