import { describe, expect, it, vi } from "vitest";
import { ConflictError, InvalidArgumentsError, UnknownToolError } from "@/lib/idempotency/errors";
import type { KeyRecord } from "@/lib/idempotency/record";
import { errorResponse } from "./problem";

/** An error as another bundle's copy of the classes throws it: same fields, different prototype chain. */
function foreign<T extends Error>(err: T): Error {
  return Object.assign(new Error(err.message), { ...err });
}

describe("errorResponse", () => {
  it("maps an engine error from another module copy by its code (instrumentation opens the runtime)", async () => {
    const original = new InvalidArgumentsError("invalid arguments for t: a: required", [{ path: "a", message: "required" }]);
    const res = errorResponse(foreign(original), "/x");
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ type: "/problems/invalid_arguments", status: 400, errors: [{ path: "a" }], instance: "/x" });
    expect(errorResponse(foreign(new UnknownToolError("nope"))).status).toBe(404);
  });

  it("keeps the record of a foreign conflict and sends the Retry-After of the problem table", async () => {
    const record = { scope: "s", key: "k", tool: "t", createdAtMs: 0, leaseUntilMs: Date.now() + 5_000, status: "inflight" } as unknown as KeyRecord;
    const res = errorResponse(foreign(new ConflictError(record)));
    expect(res.status).toBe(409);
    expect(res.headers.get("retry-after")).toBe("1");
    expect(await res.json()).toMatchObject({ key: "k", tool: "t" });
  });

  it("answers 500 without details for anything else, including errors with foreign codes", async () => {
    const logged = vi.spyOn(console, "error").mockImplementation(() => {});
    const res = errorResponse(Object.assign(new Error("the widget frobnicated at 10.0.0.7"), { code: "ERR_WIDGET" }));
    expect(logged).toHaveBeenCalledOnce();
    logged.mockRestore();
    expect(res.status).toBe(500);
    expect((await res.json()).detail).not.toContain("10.0.0.7");
  });

  it("answers a connection that failed (refused, reset, Prisma's unreachable database) 503 unavailable with Retry-After, without details", async () => {
    const logged = vi.spyOn(console, "error").mockImplementation(() => {});
    const refused = Object.assign(new Error("connect ECONNREFUSED 10.0.0.7:5432"), { code: "ECONNREFUSED" });
    const unreachable = Object.assign(new Error("Can't reach database server at 10.0.0.7:5432"), {
      code: "P1001",
      meta: { driverAdapterError: { name: "DriverAdapterError", cause: { kind: "DatabaseNotReachable", host: "10.0.0.7", port: 5432 } } },
    });
    const terminated = new Error("wrapped", { cause: new Error("Connection terminated unexpectedly") });
    for (const err of [refused, unreachable, terminated]) {
      const res = errorResponse(err);
      expect(res.status).toBe(503);
      expect(res.headers.get("retry-after")).toMatch(/^[1-9]\d*$/);
      const body = await res.json();
      expect(body).toMatchObject({ type: "/problems/unavailable", status: 503 });
      expect(body.detail).not.toContain("10.0.0.7");
    }
    logged.mockRestore();
  });
});
