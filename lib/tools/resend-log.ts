import type { PrismaClient } from "@/generated/prisma/client";
import type { ResendLog } from "./upstream";

/**
 * The arguments of `probe: resend` calls, in PostgreSQL (upstream_resends): written before a call is
 * sent, deleted once a call of the key has a known outcome, purged with the audit log otherwise.
 * They are kept in full whatever the tool's `arguments` policy, because the request is rebuilt from
 * them; only a call whose outcome is unknown keeps them past its answer.
 */
export function prismaResendLog(prisma: PrismaClient): ResendLog {
  return {
    async keep({ executionId, scope, key, tool, args, sentAtMs }) {
      const row = { scope, key, tool, arguments: JSON.stringify(args), sentAt: new Date(sentAtMs) };
      await prisma.upstreamResend.upsert({ where: { executionId }, create: { executionId, ...row }, update: row });
    },
    async forget(scope, key) {
      await prisma.upstreamResend.deleteMany({ where: { scope, key } });
    },
    async find(scope, key, executionId) {
      const row =
        (executionId ? await prisma.upstreamResend.findUnique({ where: { executionId } }) : null) ??
        (await prisma.upstreamResend.findFirst({ where: { scope, key }, orderBy: { sentAt: "desc" } }));
      if (!row || row.scope !== scope || row.key !== key) return null;
      return { args: JSON.parse(row.arguments) as unknown, sentAtMs: row.sentAt.getTime() };
    },
  };
}
