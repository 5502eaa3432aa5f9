import { PROBLEM_CODES, PROBLEMS, isProblemCode, type ProblemEntry, type RetryRule } from "@/lib/problems/problems";

/**
 * What each problem type (`/problems/<code>`) means for a caller: what happened, and what to do, as
 * the problem pages and the API reference show it. Everything comes from the one problem table
 * (lib/problems/problems.ts).
 */
export interface ProblemDoc extends ProblemEntry {
  code: string;
}

export const RETRY_LABELS: Record<RetryRule, string> = {
  yes: "yes, with the same key",
  "after Retry-After": "after Retry-After, with the same key",
  no: "no",
  "with changes": "only after fixing the request",
};

export function problemDoc(code: string): ProblemDoc | null {
  return isProblemCode(code) ? { code, ...PROBLEMS[code] } : null;
}

export function allProblemDocs(): ProblemDoc[] {
  return PROBLEM_CODES.map((code) => ({ code, ...PROBLEMS[code] })).sort((a, b) => a.status - b.status || a.code.localeCompare(b.code));
}
