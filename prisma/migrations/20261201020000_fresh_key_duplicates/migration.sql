-- Fresh-key duplicates (lib/anomalies/checks/fresh-key-duplicates.ts): the reconciler looks up
-- each execution's identical calls (same scope, tool and fingerprint) within the tool's retry
-- window, a range on this index.
-- CreateIndex
CREATE INDEX "executions_scope_tool_fingerprint_started_at_idx" ON "executions"("scope", "tool", "fingerprint", "started_at");

-- One tool's anomalies of one type in a time window, counted by status from the index alone (the
-- tool page's fresh-key duplicates: open, genuine repeats, confirmed). The index keeps the name and
-- key schema.prisma declares; INCLUDE is added here, as in 20261129040000.
-- CreateIndex
CREATE INDEX "anomalies_tool_type_detected_at_idx" ON "anomalies"("tool", "type", "detected_at") INCLUDE ("status");
