/** What the engine needs to know of a tool. The registry (lib/tools) adds schemas and upstreams. */
export interface ToolPolicy {
  name: string;
  kind: "read" | "write";
  /** how long a done record is replayed */
  ttlMs: number;
  /** how long an inflight reservation is trusted */
  leaseMs: number;
  /** what a call meeting a stuck key gets: an operator decides (block) or it runs again (takeover) */
  stuckPolicy: "block" | "takeover";
  /** keyless calls are deduplicated by their arguments for this long; null: keyless writes are refused */
  fallbackTtlMs: number | null;
}

export interface ToolContext {
  scope: string;
  /** null for reads */
  key: string | null;
  session: string | null;
  executionId: string | null;
  signal?: AbortSignal;
}

export interface ToolResult {
  /** HTTP-like status, 200 unless the tool says otherwise */
  status?: number;
  body: unknown;
}

export type RunTool = (args: unknown, ctx: ToolContext) => Promise<ToolResult>;

/**
 * Thrown by a tool for an outcome that is final (a card declined): stored like a result and replayed.
 */
export class FinalToolError extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    super(`final error ${status}`);
    this.name = "FinalToolError";
  }
}

/** Also recognizes a FinalToolError thrown by another bundle's copy of this module. */
export function isFinalToolError(err: unknown): err is FinalToolError {
  return err instanceof FinalToolError || (err instanceof Error && err.name === "FinalToolError" && "status" in err && "body" in err);
}

/** Thrown by a tool to abandon the call exactly as a crashed process would (simulation). */
export class AbandonCall extends Error {
  constructor() {
    super("call abandoned");
    this.name = "AbandonCall";
  }
}

export const DEFAULT_POLICY = {
  ttlMs: 24 * 60 * 60 * 1000,
  leaseMs: 60 * 1000,
  stuckPolicy: "block" as const,
  fallbackTtlMs: null,
  retentionMs: 7 * 24 * 60 * 60 * 1000,
  fallbackDefaultTtlMs: 60 * 1000,
};
