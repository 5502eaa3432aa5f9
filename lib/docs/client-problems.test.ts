import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { PYTHON_PROBLEMS_FILE, renderPythonProblems, renderTsRetryList, TS_RETRY_FILE } from "./client-problems";

const ROOT = path.resolve(import.meta.dirname, "../..");

describe("the clients' generated problem tables", () => {
  it.each([
    [PYTHON_PROBLEMS_FILE, renderPythonProblems],
    [TS_RETRY_FILE, renderTsRetryList],
  ])("%s is what scripts/gen-client-problems.ts writes from the server's table (run it after changing a problem type)", (file, render) => {
    expect(readFileSync(path.join(ROOT, file), "utf8")).toBe(render());
  });

  it("the retried types are the ones the problem pages say to retry", () => {
    expect(renderTsRetryList()).toContain('new Set(["/problems/conflict", "/problems/internal", "/problems/request_timeout", "/problems/server_busy", "/problems/tool_failed", "/problems/unavailable"])');
  });
});
