import { PROBLEMS, type ProblemCode } from "@/lib/problems/problems";
import { problemSchema, toJsonSchema, toolListSchema, type JsonSchema, type ToolDescription } from "./api-schemas";

export type OpenApiDocument = Record<string, unknown> & { openapi: "3.1.0"; paths: Record<string, Record<string, unknown>> };

const PROBLEM_REF = { $ref: "#/components/schemas/Problem" };

/**
 * The problem types (`/problems/<code>`) each operation can answer with. Their statuses, titles and
 * headers are read from the one problem table (lib/problems/problems.ts) that the gateway answers from,
 * so the document cannot state another status or another Retry-After than the gateway sends.
 */
export const OPERATION_PROBLEMS = {
  write: [
    "missing_key", "invalid_key", "invalid_arguments", "invalid_json", "invalid_header", "unauthorized", "forbidden", "unknown_tool",
    "conflict", "stuck", "outcome_unknown", "payload_too_large", "unsupported_media_type", "mismatch", "abandoned", "internal",
    "tool_failed", "unavailable", "tool_paused",
  ],
  read: ["invalid_arguments", "invalid_json", "invalid_header", "unauthorized", "forbidden", "unknown_tool", "payload_too_large", "unsupported_media_type", "internal", "unavailable"],
  list: ["unauthorized", "forbidden"],
  reserve: [
    "missing_key", "invalid_key", "invalid_arguments", "invalid_json", "invalid_header", "invalid_request", "unauthorized", "forbidden", "unknown_tool",
    "conflict", "stuck", "outcome_unknown", "payload_too_large", "unsupported_media_type", "mismatch", "internal", "unavailable", "tool_paused",
  ],
  settle: ["invalid_json", "invalid_request", "unauthorized", "forbidden", "not_found", "stale_token", "invalid_state", "payload_too_large", "unsupported_media_type", "internal", "unavailable"],
  held: ["invalid_request", "invalid_cursor", "unauthorized", "forbidden", "unknown_tool", "internal", "unavailable"],
  probe: [
    "invalid_json", "invalid_request", "unauthorized", "forbidden", "not_found", "probe_claimed", "not_held", "lease_running", "payload_too_large",
    "unsupported_media_type", "internal", "unavailable",
  ],
  run: ["invalid_request", "invalid_cursor", "unauthorized", "forbidden", "not_found", "internal", "unavailable"],
  replays: ["invalid_json", "invalid_request", "unauthorized", "forbidden", "payload_too_large", "unsupported_media_type", "internal", "unavailable"],
} as const satisfies Record<string, readonly ProblemCode[]>;

type OperationKind = keyof typeof OPERATION_PROBLEMS;

/** A header's schema: the exact value the gateway sends. */
function headerSchema(value: string) {
  return /^\d+$/.test(value) ? { type: "integer", const: Number(value) } : { type: "string", const: value };
}

/** status -> the problem types of this operation answered with it, in table order */
function problemsByStatus(kind: OperationKind): Map<number, ProblemCode[]> {
  const byStatus = new Map<number, ProblemCode[]>();
  for (const code of OPERATION_PROBLEMS[kind]) {
    const info = PROBLEMS[code];
    for (const status of [info.status, ...(info.otherStatuses ?? [])]) byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  return new Map([...byStatus].sort(([a], [b]) => a - b));
}

/** One error response per status and operation kind, each listing its problem types and their headers. */
function errorResponses(kind: OperationKind): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [status, codes] of problemsByStatus(kind)) {
    // a header several types of one status send (Retry-After of 503 unavailable and tool_paused) is
    // described once per type, its schema the values they send
    const sent = new Map<string, { code: string; value: string; description: string }[]>();
    for (const code of codes) {
      for (const [name, h] of Object.entries(PROBLEMS[code].headers ?? {})) sent.set(name, [...(sent.get(name) ?? []), { code, ...h }]);
    }
    const headers: Record<string, unknown> = {};
    for (const [name, all] of sent) {
      const values = [...new Set(all.map((h) => h.value))];
      headers[name] = {
        description: codes.length > 1 ? all.map((h) => `with /problems/${h.code}: ${h.description}`).join("; ") : all[0].description,
        schema: values.length === 1 ? headerSchema(values[0]) : { type: "integer", enum: values.map(Number) },
      };
    }
    out[`${kind}${status}`] = {
      description: codes.map((c) => `${PROBLEMS[c].title} (/problems/${c})`).join("; "),
      ...(Object.keys(headers).length ? { headers } : {}),
      content: { "application/problem+json": { schema: PROBLEM_REF } },
    };
  }
  return out;
}

const RESPONSES = Object.assign({}, ...(Object.keys(OPERATION_PROBLEMS) as OperationKind[]).map(errorResponses)) as Record<string, unknown>;

/** The error responses of one kind of operation, by status, as references to components.responses. */
function errorRefs(kind: OperationKind): Record<string, unknown> {
  return Object.fromEntries([...problemsByStatus(kind).keys()].map((status) => [String(status), { $ref: `#/components/responses/${kind}${status}` }]));
}

function parameters(tool: ToolDescription): unknown[] {
  const session = {
    name: "Idemgate-Session",
    in: "header",
    required: false,
    description: "the caller's run or conversation (1–200 visible ASCII characters; anything else is 400 invalid_header and nothing is reserved); recorded with every execution and suppression, read back with GET /api/v1/runs/{session}",
    schema: { type: "string", pattern: "^[\\x21-\\x7e]{1,200}$" },
  };
  if (tool.kind === "read") return [session];
  const key = {
    name: "Idempotency-Key",
    in: "header",
    required: tool.idempotencyKey === "required",
    description:
      tool.idempotencyKey === "required"
        ? "names this logical action: one key per action, the same key on every retry of it"
        : `names this logical action; without it, identical calls within ${tool.fallbackTtlMs} ms are deduplicated by their arguments`,
    schema: { type: "string", minLength: 1, maxLength: 255, pattern: "^[\\x20-\\x7e]+$" },
  };
  return [key, session];
}

function operation(tool: ToolDescription) {
  const write = tool.kind === "write";
  const hasRequired = Array.isArray(tool.argumentsSchema.required) && tool.argumentsSchema.required.length > 0;
  const success = {
    description: write ? "the result: of this execution, or the stored one on a replay" : "the result",
    ...(write
      ? { headers: { "Idempotent-Replayed": { description: "`true` when the stored result of an earlier call was returned", schema: { type: "string", enum: ["true"] } } } }
      : {}),
    content: { "application/json": { schema: tool.resultSchema ?? {} } },
  };
  const responses: Record<string, unknown> = { "200": success, ...errorRefs(write ? "write" : "read") };
  if (write) {
    responses.default = {
      description: "a final error of the tool itself (e.g. 402 card declined): stored and replayed like a result",
      content: { "application/json": { schema: {} }, "application/problem+json": { schema: PROBLEM_REF } },
    };
  }
  return {
    operationId: `invoke_${tool.name.replaceAll(".", "_")}`,
    summary: tool.description,
    tags: [tool.name.split(".")[0]],
    security: [{ bearer: [] }],
    parameters: parameters(tool),
    requestBody: { required: hasRequired, content: { "application/json": { schema: tool.argumentsSchema } } },
    responses,
    "x-idemgate": {
      kind: tool.kind,
      ttlMs: tool.ttlMs,
      leaseMs: tool.leaseMs,
      stuckPolicy: tool.stuckPolicy,
      fallbackTtlMs: tool.fallbackTtlMs,
      source: tool.source,
    },
  };
}

const headerParam = (name: string, description: string, schema: Record<string, unknown>) => ({ name, in: "header", required: false, description, schema });

/** POST /api/v1/tools/{tool}/reservations for a tool that runs in its caller's process. */
function reservation(tool: ToolDescription) {
  const key = {
    name: "Idempotency-Key",
    in: "header",
    required: tool.idempotencyKey === "required",
    description: "names this logical action: one key per action, the same key on every retry of it",
    schema: { type: "string", minLength: 1, maxLength: 255, pattern: "^[\\x20-\\x7e]+$" },
  };
  const hasRequired = Array.isArray(tool.argumentsSchema.required) && tool.argumentsSchema.required.length > 0;
  return {
    operationId: `reserve_${tool.name.replaceAll(".", "_")}`,
    summary: `Reserve a key for ${tool.name}, which runs in the caller's process: ${tool.description}`,
    description:
      "201: the intent is written; now, and only now, run the side effect, then complete or release the execution (heartbeat while it runs). " +
      "200: the stored result of an earlier call with this key; return it and do not run.",
    tags: [tool.name.split(".")[0]],
    security: [{ bearer: [] }],
    parameters: [
      key,
      headerParam("Idemgate-Session", "the caller's run or conversation (1–200 visible ASCII characters); recorded with every execution and suppression", { type: "string", pattern: "^[\\x21-\\x7e]{1,200}$" }),
      headerParam("Idemgate-Key-Source", "`model`: the key was minted by a model (advisory, also checked by the arguments)", { type: "string", enum: ["model", "orchestrator"] }),
      headerParam("Prefer", "`wait=N` (N ≤ 60): a duplicate of a running call is held until it ends", { type: "string" }),
    ],
    requestBody: {
      required: hasRequired,
      content: { "application/json": { schema: { type: "object", additionalProperties: false, required: hasRequired ? ["arguments"] : [], properties: { arguments: tool.argumentsSchema } } } },
    },
    responses: {
      "201": {
        description: "reserved: run the side effect now",
        content: {
          "application/json": {
            schema: {
              type: "object",
              required: ["state", "executionId", "token", "leaseUntil"],
              properties: {
                state: { const: "reserved" },
                executionId: { type: "string", format: "uuid" },
                token: { type: "integer", description: "send it with every complete, release and heartbeat" },
                leaseUntil: { type: "string", format: "date-time", description: "heartbeat before this (every third of the lease) while the side effect runs" },
                leaseMs: { type: "integer", minimum: 0, description: "the rest of the lease, in milliseconds by the server's clock when it answered: schedule heartbeats from this" },
              },
            },
          },
        },
      },
      "200": {
        description: "the stored result of an earlier call with this key: return it, do not run",
        headers: { "Idempotent-Replayed": { description: "always `true` here", schema: { type: "string", enum: ["true"] } } },
        content: { "application/json": { schema: DONE_SCHEMA } },
      },
      ...errorRefs("reserve"),
    },
    "x-idemgate": { kind: tool.kind, ttlMs: tool.ttlMs, leaseMs: tool.leaseMs, stuckPolicy: tool.stuckPolicy, fallbackTtlMs: tool.fallbackTtlMs, source: tool.source },
  };
}

const DONE_SCHEMA = {
  type: "object",
  required: ["state", "status", "body"],
  properties: {
    state: { const: "done" },
    status: { type: "integer" },
    body: { description: "the stored result, as it was completed" },
    executionId: { type: "string", format: "uuid", description: "the execution whose result this is" },
    expiresInMs: {
      type: "integer",
      minimum: 0,
      description:
        "how much longer this key replays this result, in milliseconds by the server's clock when it answered: a done result never changes before it expires, so a client may answer the same call (key and arguments) from its own cache until then (report such replays with POST /api/v1/replays). Left out when the result is stored under another key (an advisory key answered by its arguments window).",
    },
  },
};

/** POST /api/v1/replays: replays a client answered from its own cache, for the audit log. */
function replaysPath(): Record<string, Record<string, unknown>> {
  const item = {
    type: "object",
    additionalProperties: false,
    required: ["tool", "key", "executionId", "ageMs"],
    properties: {
      tool: { type: "string", minLength: 1, maxLength: 200 },
      key: { type: "string", minLength: 1, maxLength: 255, pattern: "^[\\x20-\\x7e]+$" },
      executionId: { type: "string", format: "uuid", description: "the execution the done answer named" },
      ageMs: { type: "integer", minimum: 0, maximum: 604_800_000, description: "how long before this report the replay happened, by the client's clock" },
      session: { type: "string", pattern: "^[\\x21-\\x7e]{1,200}$", description: "the Idemgate-Session the call would have sent" },
    },
  };
  return {
    "/api/v1/replays": {
      post: {
        operationId: "record_client_replays",
        summary:
          "Record replays a client answered from its own cache of done results: each one whose key in the token's scope is done with that execution's result is written to the audit log as a replay suppression (its gap counted to the hit's time); the others are ignored and counted.",
        tags: ["executions"],
        security: [{ bearer: [] }],
        requestBody: {
          required: true,
          content: { "application/json": { schema: { type: "object", additionalProperties: false, required: ["replays"], properties: { replays: { type: "array", maxItems: 500, items: item } } } } },
        },
        responses: {
          "200": {
            description: "recorded",
            content: { "application/json": { schema: { type: "object", required: ["recorded", "ignored"], properties: { recorded: { type: "integer", minimum: 0 }, ignored: { type: "integer", minimum: 0 } } } } },
          },
          ...errorRefs("replays"),
        },
      },
    },
  };
}

const TOKEN_SCHEMA = { type: "integer", minimum: 0, description: "the reservation's token" };

/** The three settle operations of the reservation API, one path each. */
function settlePaths(): Record<string, Record<string, unknown>> {
  const op = (action: string, summary: string, body: Record<string, unknown>, answer: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
    post: {
      operationId: `${action}_execution`,
      summary,
      tags: ["executions"],
      security: [{ bearer: [] }],
      parameters: [{ name: "executionId", in: "path", required: true, description: "from the reservation's 201", schema: { type: "string", format: "uuid" } }],
      requestBody: { required: true, content: { "application/json": { schema: body } } },
      responses: { "200": { description: "settled", ...extra, content: { "application/json": { schema: answer } } }, ...errorRefs("settle") },
    },
  });
  return {
    "/api/v1/executions/{executionId}/complete": op(
      "complete",
      "Store the result of a reserved call (status 200–299, or 400–499 for a final error, stored the same way; anything else is 400). Sent again with the same result (the same JSON, whatever the order of its keys): answered as the first time (Idempotent-Replayed); with another: 409 invalid_state. After the key was released or taken over: 409 stale_token, the result kept as a late completion.",
      { type: "object", additionalProperties: false, required: ["token", "body"], properties: { token: TOKEN_SCHEMA, status: { type: "integer", anyOf: [{ minimum: 200, maximum: 299 }, { minimum: 400, maximum: 499 }], default: 200 }, body: {} } },
      DONE_SCHEMA,
      { headers: { "Idempotent-Replayed": { description: "`true` when this completion was already stored", schema: { type: "string", enum: ["true"] } } } },
    ),
    "/api/v1/executions/{executionId}/release": op(
      "release",
      "End a reserved call without a result: not_run frees the key (nothing happened), unknown holds it until a probe or an operator decides.",
      { type: "object", additionalProperties: false, required: ["token", "outcome"], properties: { token: TOKEN_SCHEMA, outcome: { enum: ["not_run", "unknown"] }, note: { type: "string", maxLength: 1000 } } },
      { type: "object", required: ["state"], properties: { state: { enum: ["released", "unknown"] } } },
    ),
    "/api/v1/executions/{executionId}/heartbeat": op(
      "heartbeat",
      "Extend a running call's lease by the tool's lease (at most 24 h after the reservation; then 409 invalid_state). 409 stale_token once the key was released or taken over: stop.",
      { type: "object", additionalProperties: false, required: ["token"], properties: { token: TOKEN_SCHEMA } },
      { type: "object", required: ["state", "leaseUntil"], properties: { state: { const: "reserved" }, leaseUntil: { type: "string", format: "date-time" }, leaseMs: { type: "integer", minimum: 0 } } },
    ),
  };
}

const HELD_CALL_SCHEMA = {
  type: "object",
  required: ["executionId", "tool", "key", "scope", "state", "startedAt", "leaseUntil", "leaseEnded", "note", "arguments", "argumentsKept", "probe"],
  properties: {
    executionId: { type: "string", format: "uuid" },
    tool: { type: "string" },
    key: { type: "string" },
    scope: { type: "string" },
    state: { enum: ["unknown", "stuck"] },
    startedAt: { type: "string", format: "date-time" },
    leaseUntil: { type: "string", format: "date-time" },
    leaseEnded: { type: "boolean", description: "false: the call may still be running; not_applied is refused until its lease ends" },
    note: { type: ["string", "null"], description: "why its outcome is unknown" },
    arguments: { description: "the call's arguments as its tool keeps them (redacted or in full); null when none are kept" },
    argumentsKept: { type: ["string", "null"], enum: ["redacted", "full", null] },
    probe: {
      type: "object",
      required: ["attempts", "claimedUntil", "nextProbeAt", "lastNote"],
      properties: {
        attempts: { type: "integer", minimum: 0, description: "probe answers that could not tell so far" },
        claimedUntil: { type: ["string", "null"], format: "date-time", description: "a live claim by some process lasts until then" },
        nextProbeAt: { type: ["string", "null"], format: "date-time", description: "not claimable before then (a live claim, or the backoff after an unknown answer); null: now" },
        lastNote: { type: ["string", "null"] },
      },
    },
  },
};

/** The probe API for held calls of client-run tools: list, claim, answer. */
function probePaths(): Record<string, Record<string, unknown>> {
  const idParam = { name: "executionId", in: "path", required: true, description: "from the held-call list", schema: { type: "string", format: "uuid" } };
  const post = (operationId: string, summary: string, body: Record<string, unknown>, answer: Record<string, unknown>) => ({
    post: {
      operationId,
      summary,
      tags: ["probes"],
      security: [{ bearer: [] }],
      parameters: [idParam],
      requestBody: { required: true, content: { "application/json": { schema: body } } },
      responses: { "200": { description: "done", content: { "application/json": { schema: answer } } }, ...errorRefs("probe") },
    },
  });
  const claim = { type: "string", format: "uuid", description: "from the claim's answer" };
  return {
    "/api/v1/executions/{executionId}/probe/claim": post(
      "claim_probe",
      "Claim the probe of a held call (unknown, or stuck past its lease) of a client-run tool, so only one process asks its provider at a time (across every server process). 409 probe_claimed while another claim lives or the call backs off after an unknown answer (Retry-After); 409 not_held when the call was decided or its key is held by a newer call.",
      {
        type: "object",
        additionalProperties: false,
        properties: { holder: { type: "string", minLength: 1, maxLength: 200, description: "the process claiming (host:pid), recorded with its answer" }, leaseMs: { type: "integer", minimum: 1000, maximum: 300000, default: 30000 } },
      },
      { type: "object", required: ["claim", "claimedUntil", "claimMs", "call"], properties: { claim, claimedUntil: { type: "string", format: "date-time" }, claimMs: { type: "integer" }, call: HELD_CALL_SCHEMA } },
    ),
    "/api/v1/executions/{executionId}/probe/answer": post(
      "answer_probe",
      "Answer a claimed probe: applied stores the result (the key is done, retries replay it), not_applied frees the key (refused with 409 lease_running while the call's lease lasts), unknown leaves it held and asked again after a backoff. Fenced by the call's token: 409 not_held when the call was decided meanwhile (the answer is kept in the audit trail as a late answer). Recorded as the probe's decision (its token and holder), never an operator's; closes the key's unknown-outcome anomalies.",
      {
        oneOf: [
          { type: "object", additionalProperties: false, required: ["claim", "outcome", "body"], properties: { claim, outcome: { const: "applied" }, status: { type: "integer", minimum: 200, maximum: 499, default: 200 }, body: {} } },
          { type: "object", additionalProperties: false, required: ["claim", "outcome"], properties: { claim, outcome: { const: "not_applied" }, note: { type: "string", maxLength: 1000 } } },
          { type: "object", additionalProperties: false, required: ["claim", "outcome"], properties: { claim, outcome: { const: "unknown" }, note: { type: "string", maxLength: 1000 } } },
        ],
      },
      {
        type: "object",
        required: ["decision", "state"],
        properties: { decision: { enum: ["resolved", "released", "none"] }, state: { enum: ["done", "absent", "unknown", "stuck"] }, nextProbeAt: { type: "string", format: "date-time" } },
      },
    ),
  };
}

/** GET /api/v1/tools/{tool}/held for a client-run tool. */
function heldPath(tool: ToolDescription): Record<string, unknown> {
  return {
    get: {
      operationId: `list_held_${tool.name.replace(/[^A-Za-z0-9_]/g, "_")}`,
      summary: `The token's scope's held calls of ${tool.name} (unknown first, then stuck), with their kept arguments, for a probe where the tool runs. A page may be short or empty while nextCursor is set: page on until it is null.`,
      tags: ["probes"],
      security: [{ bearer: [] }],
      parameters: [
        { name: "limit", in: "query", required: false, schema: { type: "integer", minimum: 1, maximum: 100, default: 50 } },
        { name: "cursor", in: "query", required: false, description: "the previous page's nextCursor", schema: { type: "string" } },
      ],
      responses: {
        "200": {
          description: "held calls",
          content: { "application/json": { schema: { type: "object", required: ["items", "nextCursor"], properties: { items: { type: "array", items: HELD_CALL_SCHEMA }, nextCursor: { type: ["string", "null"] } } } } },
        },
        ...errorRefs("held"),
      },
    },
  };
}

const RUN_CALL_SCHEMA = {
  type: "object",
  required: ["id", "source", "at", "tool", "key", "happened", "outcome", "durationMs", "resultStatus", "suppression", "executionId", "keyPath"],
  properties: {
    id: { type: "string", description: "the execution's or the suppression's id" },
    source: { enum: ["execution", "suppression"] },
    at: { type: "string", format: "date-time" },
    tool: { type: "string" },
    key: { type: "string" },
    happened: {
      enum: ["ran", "not_run", "running", "held_stuck", "held_unknown", "decided", "resent", "replayed", "refused_duplicate", "refused_held", "refused_mismatch"],
      description: "ran: executed with a result stored; not_run: the tool said nothing happened; held_*: waiting for a probe or an operator; decided: released or resolved by one; replayed / refused_*: a duplicate that ran nothing",
    },
    outcome: { type: ["string", "null"] },
    durationMs: { type: ["integer", "null"] },
    resultStatus: { type: ["integer", "null"] },
    suppression: { type: ["string", "null"], description: "a suppression's kind: replay, conflict, stuck, unknown, mismatch, fresh_key" },
    executionId: { type: ["string", "null"], description: "the execution itself, or the one whose record answered the duplicate" },
    gapMs: { type: ["integer", "null"] },
    keyPath: { type: "string", description: "the console page of the key" },
  },
};

/** GET /api/v1/runs/{session}: a run's calls in time order, a page at a time. */
function runPath(): Record<string, Record<string, unknown>> {
  return {
    "/api/v1/runs/{session}": {
      get: {
        operationId: "get_run",
        summary:
          "The calls of one run (the Idemgate-Session they were sent with) in the token's scope, oldest first: each execution and each duplicate with what happened to it. Another scope's run is 404, as one that does not exist.",
        tags: ["runs"],
        security: [{ bearer: [] }],
        parameters: [
          { name: "session", in: "path", required: true, schema: { type: "string", pattern: "^[\\x21-\\x7e]{1,200}$" } },
          { name: "cursor", in: "query", required: false, description: "the previous page's nextCursor", schema: { type: "string" } },
          { name: "limit", in: "query", required: false, schema: { type: "integer", minimum: 1, maximum: 500, default: 100 } },
        ],
        responses: {
          "200": {
            description: "one page of the run's calls",
            content: {
              "application/json": {
                schema: {
                  type: "object",
                  required: ["session", "scope", "calls", "nextCursor"],
                  properties: { session: { type: "string" }, scope: { type: "string" }, calls: { type: "array", items: RUN_CALL_SCHEMA }, nextCursor: { type: ["string", "null"] } },
                },
              },
            },
          },
          ...errorRefs("run"),
        },
      },
    },
  };
}

/** OpenAPI 3.1: one invoke path per tool plus the tool list; every schema comes from zod. */
export function buildOpenApiDocument(tools: readonly ToolDescription[], baseUrl?: string): OpenApiDocument {
  const paths: Record<string, Record<string, unknown>> = {
    "/api/v1/tools": {
      get: {
        operationId: "list_tools",
        summary: "The configured tools, their policies and argument schemas",
        tags: ["tools"],
        security: [{ bearer: [] }],
        responses: {
          "200": { description: "the tools", content: { "application/json": { schema: toJsonSchema(toolListSchema, "output") } } },
          ...errorRefs("list"),
        },
      },
    },
  };
  // a tool run by its caller is never invoked through the gateway: it is reserved, run, settled
  for (const tool of tools) {
    if (tool.source === "client") {
      paths[`/api/v1/tools/${tool.name}/reservations`] = { post: reservation(tool) };
      paths[`/api/v1/tools/${tool.name}/held`] = heldPath(tool);
    }
    else paths[`/api/v1/tools/${tool.name}/invoke`] = { post: operation(tool) };
  }
  if (tools.some((tool) => tool.source === "client")) Object.assign(paths, settlePaths(), probePaths(), replaysPath());
  Object.assign(paths, runPath());

  return {
    openapi: "3.1.0",
    info: {
      title: "Idemgate gateway",
      version: "1",
      description: "Invoke tools exactly once per Idempotency-Key. A retry with the same key gets the stored result and `Idempotent-Replayed: true`.",
    },
    jsonSchemaDialect: "https://json-schema.org/draft/2020-12/schema",
    ...(baseUrl ? { servers: [{ url: baseUrl.replace(/\/+$/, "") }] } : {}),
    paths,
    components: {
      schemas: { Problem: toJsonSchema(problemSchema, "output") as JsonSchema },
      responses: RESPONSES,
      securitySchemes: { bearer: { type: "http", scheme: "bearer", description: "an API token; its scope is the namespace of the keys" } },
    },
  };
}
