import Link from "next/link";
import { ApiError } from "@/lib/console/api";

/** An API error as the operator should read it: the problem's title and detail, and what to do on 401. */
export function ProblemAlert({ error, testId = "problem" }: { error: unknown; testId?: string }) {
  const api = error instanceof ApiError ? error : null;
  const title = api?.problem.title ?? "Request failed";
  const detail = api ? api.problem.detail : error instanceof Error ? error.message : String(error);
  return (
    <div role="alert" data-testid={testId} className="rounded-lg border border-bad/30 bg-bad-soft px-4 py-3 text-[13px]">
      <p className="font-medium text-bad">
        {title}
        {api && <span className="ml-2 font-mono text-[12px] font-normal opacity-80">HTTP {api.status}</span>}
      </p>
      {detail && <p className="mt-1 text-fg/85">{detail}</p>}
      {api?.problem.errors && api.problem.errors.length > 0 && (
        <ul className="mt-1 list-disc pl-5 text-fg/85">
          {api.problem.errors.map((e, i) => (
            <li key={i}>
              <span className="font-mono text-[12px]">{e.path}</span>: {e.message}
            </li>
          ))}
        </ul>
      )}
      {api?.status === 401 && (
        <p className="mt-1">
          Your session has ended.{" "}
          <Link href="/login" className="font-medium text-accent underline">
            Sign in again
          </Link>
        </p>
      )}
    </div>
  );
}
