import type { Metadata } from "next";
import { notFound } from "next/navigation";
import { CallsPanel } from "@/components/tools/panels/calls-panel";
import { DeclarationPanel } from "@/components/tools/panels/declaration-panel";
import { PassThroughPanel, SuppressionLogPanel } from "@/components/tools/panels/log-panels";
import { NotGatedPanel } from "@/components/tools/panels/not-gated-panel";
import { PolicyPanel } from "@/components/tools/panels/policy-panel";
import { RetryGapsPanel } from "@/components/tools/panels/retry-gaps-panel";
import { RunPanel } from "@/components/tools/panels/run-panel";
import { SummaryPanel } from "@/components/tools/panels/summary-panel";
import { ToolHeader } from "@/components/tools/panels/tool-header";
import { requireOperator } from "@/lib/auth/require-operator";
import { getToolPage } from "@/lib/console/get-tool-page";
import { metadataParam, pageParam } from "@/lib/console/page-param";
import { getRuntime } from "@/lib/server/runtime";
import { PausePanel } from "@/components/tools/pause-panel";
import { can } from "@/lib/auth/roles";
import { toolPause } from "@/lib/operator/pause-tool";

export const dynamic = "force-dynamic";

type Props = { params: Promise<{ name: string }>; searchParams: Promise<{ window?: string | string[] }> };

export async function generateMetadata({ params }: Props): Promise<Metadata> {
  return { title: metadataParam((await params).name) };
}

// Each panel takes the whole page's data and renders nothing when it does not apply to this tool
// (a read tool has no figures, a client-run tool no invoke form): a new panel is one line here.
export default async function ToolPage({ params, searchParams }: Props) {
  const operator = await requireOperator();
  const name = pageParam((await params).name);
  const runtime = await getRuntime();
  const page = name === null ? null : await getToolPage(runtime, name, (await searchParams).window, operator.role);
  if (page === null) notFound();

  return (
    <div className="space-y-6">
      <ToolHeader page={page} />
      {page.tool.kind === "write" && <PausePanel state={await toolPause(runtime, page.tool.name)} canPause={can(operator.role, "pause_tools")} />}
      <SummaryPanel page={page} />
      <CallsPanel page={page} />
      <div className="grid gap-6 lg:grid-cols-[3fr_2fr] lg:items-start">
        <RetryGapsPanel page={page} />
        <NotGatedPanel page={page} />
        <PolicyPanel page={page} />
      </div>
      <DeclarationPanel page={page} />
      <RunPanel page={page} />
      <PassThroughPanel page={page} />
      <SuppressionLogPanel page={page} />
    </div>
  );
}
