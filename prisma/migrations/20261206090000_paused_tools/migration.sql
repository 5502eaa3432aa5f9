-- Paused write tools (lib/operator/pause-tool.ts): every server process reads this table to refuse
-- the tools' new first executions (lib/idempotency/paused-tools.ts).
-- CreateTable
CREATE TABLE "paused_tools" (
    "tool" TEXT NOT NULL,
    "reason" TEXT NOT NULL,
    "actor" TEXT NOT NULL,
    "paused_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "paused_tools_pkey" PRIMARY KEY ("tool")
);

