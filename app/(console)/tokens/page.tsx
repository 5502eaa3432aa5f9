import type { Metadata } from "next";
import { notFound } from "next/navigation";
import { TokensView } from "@/components/tokens/tokens-view";
import { listApiTokens } from "@/lib/auth/api-tokens";
import { requireOperator } from "@/lib/auth/require-operator";
import { can } from "@/lib/auth/roles";
import { getRuntime } from "@/lib/server/runtime";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "API tokens" };

// /tokens – the deployment's API tokens: list, create (the secret shown once), revoke. Operators only:
// a viewer is answered 404, as if the page did not exist (the API answers them 403).
export default async function TokensPage() {
  const operator = await requireOperator();
  if (!can(operator.role, "manage_tokens")) notFound();
  const runtime = await getRuntime();
  const tokens = await listApiTokens(runtime.db.prisma);
  return (
    <TokensView
      initialTokens={tokens.map((t) => ({
        ...t,
        createdAt: t.createdAt.toISOString(),
        revokedAt: t.revokedAt?.toISOString() ?? null,
        lastUsedAt: t.lastUsedAt?.toISOString() ?? null,
      }))}
    />
  );
}
