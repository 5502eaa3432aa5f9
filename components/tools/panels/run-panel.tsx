import { randomUUID } from "node:crypto";
import Link from "next/link";
import { InvokeForm } from "@/components/tools/invoke-form";
import { can } from "@/lib/auth/roles";
import type { ToolPage } from "@/lib/console/get-tool-page";
import { headingId } from "@/lib/docs/guides";
import { exampleFromSchema } from "@/lib/docs/json-schema";
import { Card } from "./card";

/** Run the tool from here through the gateway; a tool that runs in its caller's process says how it is guarded instead. */
export function RunPanel({ page }: { page: ToolPage }) {
  const { tool } = page;
  if (page.declaration.runs === "client") {
    return (
      <Card title="How it is guarded" aside={`POST /api/v1/tools/${tool.name}/reservations`} testId="client-guard-card">
        <p className="px-5 py-4 text-[13px] text-muted">
          {tool.name} runs in its caller&apos;s process, so Idemgate never runs it and it cannot be invoked from here. The caller wraps
          the function in <code className="font-mono text-[12.5px]">guard()</code> (TypeScript) or{" "}
          <code className="font-mono text-[12.5px]">@idempotent</code> (Python): Idemgate reserves the key, and the function runs only
          for a new key; its result is stored and replayed to every retry.{" "}
          <Link href={`/docs/integrate#${headingId("Guard a function where it runs")}`} className="text-accent hover:underline">
            Guard a function where it runs
          </Link>
        </p>
      </Card>
    );
  }
  return (
    <Card title="Invoke through the gateway" aside={`POST /api/v1/tools/${tool.name}/invoke`} testId="invoke-card">
      <InvokeForm
        tool={{ name: tool.name, kind: tool.kind, idempotencyKey: tool.idempotencyKey, fallbackTtlMs: tool.fallbackTtlMs }}
        exampleArguments={JSON.stringify(exampleFromSchema(tool.argumentsSchema), null, 2)}
        initialKey={randomUUID()}
        canInvoke={can(page.role, "invoke")}
        role={page.role}
      />
    </Card>
  );
}
