import type { Metadata } from "next";
import Link from "next/link";
import { notFound } from "next/navigation";
import { KeyDetailView } from "@/components/keys/key-detail-view";
import { KeyRelations } from "@/components/keys/key-relations";
import { listKeyAnomalies } from "@/lib/anomalies/key-anomalies";
import { countKeyOperatorActions } from "@/lib/audit/operator-actions";
import { requireOperator } from "@/lib/auth/require-operator";
import { can } from "@/lib/auth/roles";
import { metadataParam, pageParam } from "@/lib/console/page-param";
import { getKeyDetail } from "@/lib/operator/get-key-detail";
import { presentKeyDetail } from "@/lib/operator/present-key-detail";
import { runPath, sessionOfKey } from "@/lib/console/get-run";
import { getRuntime } from "@/lib/server/runtime";

export const dynamic = "force-dynamic";

type Params = { scope: string; key: string };

/** operator actions counted for the key's link to the audit trail, at most */
const AUDIT_CAP = 100;

export async function generateMetadata({ params }: { params: Promise<Params> }): Promise<Metadata> {
  return { title: `Key ${metadataParam((await params).key)}` };
}

export default async function KeyPage({ params }: { params: Promise<Params> }) {
  const operator = await requireOperator();
  const p = await params;
  const scope = pageParam(p.scope);
  const key = pageParam(p.key);
  if (scope === null || key === null) notFound();
  const runtime = await getRuntime();
  const renderedAtMs = Date.now();
  const [found, anomalies, auditCount] = await Promise.all([
    getKeyDetail(runtime, scope, key),
    listKeyAnomalies(runtime.db.prisma, scope, key),
    countKeyOperatorActions(runtime.db.prisma, scope, key, AUDIT_CAP),
  ]);
  const detail = presentKeyDetail(found);
  const runSession = sessionOfKey(found);
  const tool = detail.record?.tool ?? anomalies[0]?.tool ?? null;
  return (
    <div className="space-y-4">
      <nav aria-label="Breadcrumb" className="text-[13px] text-muted">
        <Link href="/keys" className="hover:text-fg hover:underline">Keys</Link>
        <span aria-hidden="true" className="px-1.5">/</span>
        <Link href={`/keys?scope=${encodeURIComponent(scope)}`} className="font-mono text-[12.5px] hover:text-fg hover:underline">{scope}</Link>
        {/* the run (Idemgate-Session) of the key's calls: its other calls in order */}
        {runSession && (
          <Link href={runPath(scope, runSession)} className="ml-3 text-accent hover:underline" data-testid="key-run-link">
            Run <span className="font-mono text-[12.5px]">{runSession}</span>
          </Link>
        )}
      </nav>
      <KeyDetailView
        initial={detail}
        canRelease={can(operator.role, "release")}
        canResolve={can(operator.role, "resolve")}
        // the probe resolves or releases the key on the tool's word: both permissions
        canProbe={can(operator.role, "resolve") && can(operator.role, "release")}
        renderedAtMs={renderedAtMs}
      />
      <KeyRelations
        scope={scope}
        keyName={key}
        tool={tool}
        anomalies={anomalies.map((a) => ({ ...a, detectedAt: a.detectedAt.toISOString() }))}
        auditCount={auditCount}
        auditCap={AUDIT_CAP}
      />
    </div>
  );
}
