-- The console's aggregates read only these indexes (index-only scans): tool totals and the
-- overview from the time indexes, one tool's buckets, outcomes, durations and retry gaps from the
-- (tool, time) ones. The indexes keep their names and keys, so schema.prisma still describes them.
DROP INDEX "executions_tool_started_at_idx";
CREATE INDEX "executions_tool_started_at_idx" ON "executions"("tool", "started_at") INCLUDE ("outcome", "duration_ms");

DROP INDEX "executions_started_at_idx";
CREATE INDEX "executions_started_at_idx" ON "executions"("started_at") INCLUDE ("tool");

DROP INDEX "suppressions_tool_at_idx";
CREATE INDEX "suppressions_tool_at_idx" ON "suppressions"("tool", "at") INCLUDE ("kind", "fallback", "gap_ms");

DROP INDEX "suppressions_at_idx";
CREATE INDEX "suppressions_at_idx" ON "suppressions"("at") INCLUDE ("tool", "kind");

-- The audit trail filtered by actor or action, and the distinct values for its filter menus.
CREATE INDEX "operator_actions_actor_at_idx" ON "operator_actions"("actor", "at");
CREATE INDEX "operator_actions_action_at_idx" ON "operator_actions"("action", "at");

-- Open anomalies counted per type.
CREATE INDEX "anomalies_status_type_idx" ON "anomalies"("status", "type");
