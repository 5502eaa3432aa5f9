-- The search's copy of an execution's kept arguments no longer references its execution: the
-- foreign key's check locked each execution's row as its copy went in (a row lock written to the
-- table and to the WAL), about a tenth of PostgreSQL's work per first execution (docs/benchmarks.md).
-- A copy is only ever written from its execution's row (lib/audit/argument-index.ts), and retention
-- deletes an execution's copy with it, and any copy older than its cut-off whose execution is gone
-- (lib/audit/purge-audit.ts), which is what ON DELETE CASCADE did.
ALTER TABLE "execution_argument_index" DROP CONSTRAINT "execution_argument_index_execution_id_fkey";
