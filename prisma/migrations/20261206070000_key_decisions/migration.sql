-- Decisions about held keys (release, resolve; by an operator, a bulk release or a status probe),
-- written before the key store acts on them and deleted once the audit log and the operator trail
-- record them: one left behind by a process that stopped half-way is carried out by the reconciler
-- (lib/operator/key-decisions.ts).
-- CreateTable
CREATE TABLE "key_decisions" (
    "id" TEXT NOT NULL,
    "scope" TEXT NOT NULL,
    "key" TEXT NOT NULL,
    "execution_id" TEXT NOT NULL,
    "decision" TEXT NOT NULL,
    "actor" TEXT NOT NULL,
    "reason" TEXT NOT NULL,
    "force" BOOLEAN NOT NULL DEFAULT false,
    "result_status" INTEGER,
    "result_body" TEXT,
    "ttl_ms" BIGINT,
    "state_before" JSONB,
    "created_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "key_decisions_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "key_decisions_created_at_idx" ON "key_decisions"("created_at");
