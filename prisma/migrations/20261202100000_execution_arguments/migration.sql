-- Each execution keeps its call's arguments for operators, as its tool's argument policy says
-- (redacted by default, in full, or not at all), and an unknown outcome's last answer from the
-- tool's service. Both leave with the audit log's retention.
ALTER TABLE "executions" ADD COLUMN     "answer_body" TEXT,
ADD COLUMN     "answer_status" INTEGER,
ADD COLUMN     "arguments" JSONB,
ADD COLUMN     "arguments_kept" TEXT;
