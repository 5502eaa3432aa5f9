-- The search's copy of an execution's kept arguments no longer references its execution: the
-- foreign key's check locked each execution's row as its copy went in (a row lock written to the
-- table and to the WAL), about 5 µs of PostgreSQL per copy (docs/benchmarks.md).
-- A copy is only ever written from its execution's row (lib/audit/argument-index.ts); retention
-- deletes an execution's copy with it (lib/audit/purge-audit.ts), which is what ON DELETE CASCADE
-- did, and the background deletes a copy written while its execution was being deleted
-- (deleteOrphanCopies, a slice of the copies per pass).
ALTER TABLE "execution_argument_index" DROP CONSTRAINT "execution_argument_index_execution_id_fkey";
