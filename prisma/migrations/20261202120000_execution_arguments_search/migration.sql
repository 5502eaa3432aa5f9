-- The console's search finds executions by an argument value (`arguments @> '{"customerId":"cus_42"}'`):
-- jsonb_path_ops indexes each path-and-value hash, smaller and faster than the default opclass for
-- containment, which is the only operator the search uses.
CREATE INDEX "executions_arguments_path_ops_idx" ON "executions" USING GIN ("arguments" jsonb_path_ops);
