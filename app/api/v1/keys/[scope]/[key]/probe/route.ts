import { withPrincipal } from "@/lib/auth/guard";
import { actorOf } from "@/lib/auth/actor";
import { redactValue } from "@/lib/idempotency/redaction";
import { presentKey } from "@/lib/operator/present-key";
import { probeKey } from "@/lib/operator/probe-key";

export const dynamic = "force-dynamic";

// POST /api/v1/keys/{scope}/{key}/probe – ask a stuck or unknown key's tool whether its call happened:
// applied resolves the key with the tool's result, not applied releases it, otherwise nothing changes
// (it may resolve or release, so it needs an operator: the role that may do both)
export const POST = withPrincipal<{ scope: string; key: string }>("resolve", async (_request, { params, principal, runtime }) => {
  const out = await probeKey(runtime, {
    scope: params.scope,
    key: params.key,
    actor: actorOf(principal),
  });
  return Response.json({ answer: redactValue(out.answer), action: out.action, record: out.record ? presentKey(out.record, Date.now(), true) : null });
});
