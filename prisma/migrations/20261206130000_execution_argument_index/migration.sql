-- The search by an argument value reads an indexed copy of the kept arguments in a table of its own,
-- written by the audit writer after the intent's commit (lib/audit/argument-index.ts): the two GIN
-- indexes no longer lengthen the commit a reservation waits for. The arguments stay on the
-- execution's row, the copy goes with it (ON DELETE CASCADE: retention removes both), and a copy
-- the writer did not write (its process stopped in between) is written again from the log at the
-- writer's start and by the reconciler.
CREATE TABLE "execution_argument_index" (
    "execution_id" TEXT NOT NULL,
    "scope" TEXT NOT NULL,
    "started_at" TIMESTAMP(3) NOT NULL,
    "arguments" JSONB NOT NULL,

    CONSTRAINT "execution_argument_index_pkey" PRIMARY KEY ("execution_id"),
    CONSTRAINT "execution_argument_index_execution_id_fkey" FOREIGN KEY ("execution_id") REFERENCES "executions"("id") ON DELETE CASCADE ON UPDATE CASCADE
);

INSERT INTO "execution_argument_index" ("execution_id", "scope", "started_at", "arguments")
SELECT "id", "scope", "started_at", "arguments" FROM "executions" WHERE "arguments" IS NOT NULL;

-- `name:value` (`arguments @> '{"customerId":"cus_42"}'`) and a bare value under any top-level name
-- (`jsonb_path_query_array(arguments, '$.*') @> '["cus_42"]'`), as on executions before
CREATE INDEX "execution_argument_index_path_ops_idx" ON "execution_argument_index" USING GIN ("arguments" jsonb_path_ops);
CREATE INDEX "execution_argument_index_values_idx" ON "execution_argument_index" USING GIN ((jsonb_path_query_array("arguments", '$.*')) jsonb_path_ops);

DROP INDEX "executions_arguments_path_ops_idx";
DROP INDEX "executions_argument_values_idx";
