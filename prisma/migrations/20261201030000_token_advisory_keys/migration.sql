-- AlterTable
ALTER TABLE "api_tokens" ADD COLUMN     "advisory_keys" BOOLEAN NOT NULL DEFAULT false;

