import type { Metadata } from "next";
import Link from "next/link";
import { notFound } from "next/navigation";
import { AnomalyDetailView } from "@/components/anomalies/anomaly-detail-view";
import { typeInfo } from "@/components/anomalies/anomaly-types";
import type { AnomalyView } from "@/lib/console/queries/anomalies";
import { getAnomaly } from "@/lib/anomalies/anomalies";
import { requireOperator } from "@/lib/auth/require-operator";
import { can } from "@/lib/auth/roles";
import { metadataParam, pageParam } from "@/lib/console/page-param";
import { isIdemgateError } from "@/lib/idempotency/errors";
import { stateOf } from "@/lib/idempotency/record";
import { getRuntime, type Runtime } from "@/lib/server/runtime";

export const dynamic = "force-dynamic";

type Params = { id: string };

async function load(runtime: Runtime, id: string | null) {
  if (id === null) notFound();
  try {
    return await getAnomaly(runtime.db.prisma, id);
  } catch (err) {
    if (isIdemgateError(err, "not_found")) notFound();
    throw err;
  }
}

export async function generateMetadata({ params }: { params: Promise<Params> }): Promise<Metadata> {
  const id = metadataParam((await params).id);
  const row = await getAnomaly((await getRuntime()).db.prisma, id).catch(() => null);
  return { title: row ? `${typeInfo(row.type).label} · ${row.tool}` : "Anomaly" };
}

export default async function AnomalyPage({ params }: { params: Promise<Params> }) {
  const operator = await requireOperator();
  const id = pageParam((await params).id);
  const runtime = await getRuntime();
  const row = await load(runtime, id);
  // the key now, for the release/resolve buttons; the evidence holds its state at detection
  const keyNow =
    row.scope !== null && row.key !== null
      ? await runtime.store
          .get(row.scope, row.key)
          .then((r) => (r ? { state: stateOf(r, Date.now()), token: r.token, executionId: r.executionId } : { state: "absent", token: null, executionId: null }))
          .catch(() => null)
      : null;
  const anomaly = JSON.parse(JSON.stringify(row)) as AnomalyView;
  return (
    <div className="space-y-4">
      <nav aria-label="Breadcrumb" className="text-[13px] text-muted">
        <Link href="/anomalies" className="hover:text-fg hover:underline">Anomalies</Link>
        <span aria-hidden="true" className="px-1.5">/</span>
        <span className="font-mono text-[12.5px]">{row.id.slice(0, 8)}</span>
      </nav>
      <AnomalyDetailView
        initial={anomaly}
        initialKey={keyNow}
        canAcknowledge={can(operator.role, "acknowledge")}
        canRelease={can(operator.role, "release")}
        canResolve={can(operator.role, "resolve")}
        renderedAtMs={Date.now()}
      />
    </div>
  );
}
