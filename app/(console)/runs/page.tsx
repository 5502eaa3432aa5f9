import type { Metadata } from "next";
import { RunsTable } from "@/components/runs/runs-table";
import { requireOperator } from "@/lib/auth/require-operator";
import { listRecentRuns } from "@/lib/console/get-run";
import { getRuntime } from "@/lib/server/runtime";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "Runs" };

type Props = { searchParams: Promise<{ scope?: string | string[] }> };

export default async function RunsPage({ searchParams }: Props) {
  await requireOperator();
  const raw = (await searchParams).scope;
  const scope = typeof raw === "string" && raw !== "" ? raw : null;
  const runs = await listRecentRuns(await getRuntime(), { scope });
  return (
    <div className="space-y-4">
      <div>
        <h1 className="text-xl font-semibold tracking-tight">Runs</h1>
        <p className="mt-1 max-w-3xl text-muted">
          Agent runs and jobs with calls in the last 24 hours, by the <code className="font-mono text-[12.5px]">Idemgate-Session</code> their calls were sent
          with{scope ? ` in scope ${scope}` : ""}: what ran, what was suppressed, and what is held for a decision. Search <code className="font-mono text-[12.5px]">session:ID</code> for an older one.
        </p>
      </div>
      <section className="min-w-0 overflow-hidden rounded-xl border border-line bg-surface shadow-xs">
        {runs.length === 0 ? (
          <p className="px-5 py-6 text-[13px] text-muted" data-testid="runs-empty">
            No calls with a session in the last 24 hours. Send <code className="font-mono text-[12px]">Idemgate-Session: &lt;run id&gt;</code> with each call (the clients&apos; <code className="font-mono text-[12px]">session</code> option) to see its run here.
          </p>
        ) : (
          <RunsTable runs={runs} />
        )}
      </section>
    </div>
  );
}
