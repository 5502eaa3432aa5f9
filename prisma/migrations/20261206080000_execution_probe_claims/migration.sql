-- Probes of held client-run calls (lib/gateway/probes.ts): one live claim per execution, shared by
-- every server process, and the backoff after a probe that could not tell.
-- AlterTable
ALTER TABLE "executions" ADD COLUMN     "probe_attempts" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "probe_claim" TEXT,
ADD COLUMN     "probe_holder" TEXT,
ADD COLUMN     "probe_note" TEXT,
ADD COLUMN     "probe_until" TIMESTAMP(3);
