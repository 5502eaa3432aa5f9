-- A run's calls (Idemgate-Session) in time order, a page at a time, without a scan of the log
-- (lib/audit/run-calls.ts): partial, since many calls carry no session.
CREATE INDEX "executions_session_scope_started_at_idx" ON "executions" ("session", "scope", "started_at", "id") WHERE "session" IS NOT NULL;
CREATE INDEX "suppressions_session_scope_at_idx" ON "suppressions" ("session", "scope", "at", "id") WHERE "session" IS NOT NULL;
