import type { Metadata } from "next";
import { Suspense } from "react";
import { KeysView } from "@/components/keys/keys-view";
import { requireOperator } from "@/lib/auth/require-operator";
import { can } from "@/lib/auth/roles";
import { getRuntime } from "@/lib/server/runtime";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "Keys" };

const GATEWAY_EXAMPLE = (origin: string) => `curl -X POST ${origin}/api/v1/tools/payments.charge/invoke \\
  -H "Authorization: Bearer $IDEMGATE_TOKEN" \\
  -H "Idempotency-Key: order-1234-charge" \\
  -H "Content-Type: application/json" \\
  -d '{"customerId":"cus_42","amountCents":1999,"currency":"EUR"}'`;

export default async function KeysPage() {
  const operator = await requireOperator();
  const runtime = await getRuntime();
  // only write tools reserve keys
  const tools = runtime.registry
    .list()
    .filter((t) => t.kind === "write")
    .map((t) => t.name)
    .sort();
  return (
    <Suspense>
      <KeysView tools={tools} canRelease={can(operator.role, "release")} gatewayExample={GATEWAY_EXAMPLE(`http://localhost:${runtime.config.port}`)} />
    </Suspense>
  );
}
