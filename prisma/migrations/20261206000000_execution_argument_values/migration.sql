-- The console's search finds executions by a bare argument value, under whatever top-level name it
-- was given (`jsonb_path_query_array(arguments, '$.*') @> '["cus_42"]'`): the array of a call's
-- top-level values, indexed like the arguments themselves, so a bare value needs no list of argument
-- names to try it under (lib/audit/find-executions.ts). lax mode: a value that is no object gives an
-- empty array, never an error.
CREATE INDEX "executions_argument_values_idx" ON "executions" USING GIN ((jsonb_path_query_array("arguments", '$.*')) jsonb_path_ops);
