-- Keys whose call ended without knowing whether its side effect happened: status 'unknown', with
-- the reason (outcome_note) and the time (unknown_at_ms). An unknown row's deadline_ms is its
-- unknown_at_ms, so the (status, deadline_ms) indexes list unknown keys newest first. The
-- key_counts triggers (20261129030000) count per stored status whatever its name: nothing to change.

-- AlterTable
ALTER TABLE "idempotency_keys" ADD COLUMN     "outcome_note" TEXT,
ADD COLUMN     "unknown_at_ms" BIGINT;

