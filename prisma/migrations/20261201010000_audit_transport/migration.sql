-- AlterTable
ALTER TABLE "executions" ADD COLUMN     "transport" TEXT NOT NULL DEFAULT 'http';

-- AlterTable
ALTER TABLE "suppressions" ADD COLUMN     "transport" TEXT NOT NULL DEFAULT 'http';

