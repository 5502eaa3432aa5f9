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
      // the same execution kept again (a takeover sends it again) keeps its first sentAt
      await prisma.upstreamResend.upsert({ where: { executionId }, create: { executionId, ...row }, update: { arguments: row.arguments } });
    },
    async forget(scope, key) {
      await prisma.upstreamResend.deleteMany({ where: { scope, key } });
    },
    async find(scope, key, tool, executionId) {
      const asked = executionId ? await prisma.upstreamResend.findUnique({ where: { executionId } }) : null;
      const row =
        asked && asked.scope === scope && asked.key === key && asked.tool === tool
          ? asked
          : await prisma.upstreamResend.findFirst({ where: { scope, key, tool }, orderBy: { sentAt: "desc" } });
      if (!row) return null;
      // The service's retention runs from the key's first send: every attempt of the key (each
      // retry is an execution of its own) was sent with the same key, the earliest first.
      const first = await prisma.upstreamResend.aggregate({ where: { scope, key, tool }, _min: { sentAt: true } });
      const sentAt = first._min.sentAt && first._min.sentAt < row.sentAt ? first._min.sentAt : row.sentAt;
      return { args: JSON.parse(row.arguments) as unknown, sentAtMs: sentAt.getTime() };
    },
  };
}
