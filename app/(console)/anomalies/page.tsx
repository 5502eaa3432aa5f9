import type { Metadata } from "next";
import { Suspense } from "react";
import { AnomaliesView } from "@/components/anomalies/anomalies-view";
import { countOpenAnomalies } from "@/lib/anomalies/anomalies";
import { requireOperator } from "@/lib/auth/require-operator";
import { can } from "@/lib/auth/roles";
import { getRuntime } from "@/lib/server/runtime";
import { openAnomalyCounts } from "./actions";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "Anomalies" };

export default async function AnomaliesPage() {
  const operator = await requireOperator();
  const runtime = await getRuntime();
  const counts = await countOpenAnomalies(runtime.db.prisma).catch(() => null);
  // only write tools reserve keys, so only they can produce anomalies
  const tools = runtime.registry
    .list()
    .filter((t) => t.kind === "write")
    .map((t) => t.name)
    .sort();
  return (
    <Suspense>
      <AnomaliesView
        initialCounts={counts}
        loadCounts={openAnomalyCounts}
        tools={tools}
        canReconcile={can(operator.role, "reconcile")}
        reconcileIntervalMs={runtime.config.reconcileIntervalMs}
        auditMode={runtime.config.auditMode}
      />
    </Suspense>
  );
}
