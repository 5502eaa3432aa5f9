-- AlterTable
ALTER TABLE "executions" ADD COLUMN     "result_body" TEXT,
ADD COLUMN     "result_final" BOOLEAN;

