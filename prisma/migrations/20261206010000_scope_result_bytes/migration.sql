-- Each scope's stored result bytes by the hour their records expire (lib/idempotency/scope-result-limit.ts):
-- the SQL key store's count for the per-scope limit on stored results, added to as results are stored,
-- summed over the hours to come, and the hours past deleted by the purge.
CREATE TABLE "scope_result_bytes" (
    "scope" TEXT NOT NULL,
    "expires_hour" BIGINT NOT NULL,
    "bytes" BIGINT NOT NULL,

    CONSTRAINT "scope_result_bytes_pkey" PRIMARY KEY ("scope","expires_hour")
);

-- The completions stored as a placeholder because their scope was over its limit, by time: the
-- reconciler's scan of them (lib/anomalies/checks/results-over-limit.ts) reads this small index only.
CREATE INDEX "executions_result_over_limit_idx" ON "executions" ("finished_at", "id")
    WHERE "result_body" LIKE '{"idemgate":{"resultOverTenantLimit":true%';
