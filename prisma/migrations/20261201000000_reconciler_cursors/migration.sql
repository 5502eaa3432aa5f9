-- Where each reconciler scan continues in the audit log (lib/anomalies/scan-cursor.ts): the
-- (time, id) of the row it examined last, whether it had caught up, and for scans that re-examine
-- in rounds (lost completions), when the current round began. One row per scan.

-- CreateTable
CREATE TABLE "reconciler_cursors" (
    "name" TEXT NOT NULL,
    "after_at" TIMESTAMP(3) NOT NULL,
    "after_id" TEXT NOT NULL,
    "caught_up" BOOLEAN NOT NULL DEFAULT false,
    "round_started_at" TIMESTAMP(3),
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "reconciler_cursors_pkey" PRIMARY KEY ("name")
);
