-- CreateSchema
CREATE SCHEMA IF NOT EXISTS "public";

-- CreateTable
CREATE TABLE "idempotency_keys" (
    "scope" TEXT NOT NULL,
    "key" TEXT NOT NULL,
    "tool" TEXT NOT NULL,
    "fingerprint" TEXT NOT NULL,
    "status" TEXT NOT NULL,
    "token" BIGINT NOT NULL,
    "created_at_ms" BIGINT NOT NULL,
    "lease_until_ms" BIGINT,
    "completed_at_ms" BIGINT,
    "expires_at_ms" BIGINT,
    "deadline_ms" BIGINT NOT NULL,
    "result_status" INTEGER,
    "result_body" TEXT,
    "final" BOOLEAN NOT NULL DEFAULT false,
    "fallback" BOOLEAN NOT NULL DEFAULT false,
    "session" TEXT,
    "execution_id" TEXT,

    CONSTRAINT "idempotency_keys_pkey" PRIMARY KEY ("scope","key")
);

-- CreateTable
CREATE TABLE "executions" (
    "id" TEXT NOT NULL,
    "scope" TEXT NOT NULL,
    "key" TEXT NOT NULL,
    "tool" TEXT NOT NULL,
    "fingerprint" TEXT NOT NULL,
    "token" BIGINT NOT NULL,
    "session" TEXT,
    "caller" TEXT,
    "fallback" BOOLEAN NOT NULL DEFAULT false,
    "started_at" TIMESTAMP(3) NOT NULL,
    "lease_until" TIMESTAMP(3) NOT NULL,
    "outcome" TEXT,
    "finished_at" TIMESTAMP(3),
    "duration_ms" INTEGER,
    "result_status" INTEGER,
    "expires_at" TIMESTAMP(3),
    "error" TEXT,

    CONSTRAINT "executions_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "suppressions" (
    "id" TEXT NOT NULL,
    "scope" TEXT NOT NULL,
    "key" TEXT NOT NULL,
    "tool" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "fallback" BOOLEAN NOT NULL DEFAULT false,
    "gap_ms" INTEGER,
    "session" TEXT,
    "caller" TEXT,
    "original_session" TEXT,
    "original_execution_id" TEXT,
    "at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "suppressions_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "operator_actions" (
    "id" TEXT NOT NULL,
    "actor" TEXT NOT NULL,
    "action" TEXT NOT NULL,
    "scope" TEXT,
    "key" TEXT,
    "anomaly_id" TEXT,
    "reason" TEXT NOT NULL,
    "state_before" JSONB,
    "state_after" JSONB,
    "at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "operator_actions_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "anomalies" (
    "id" TEXT NOT NULL,
    "type" TEXT NOT NULL,
    "dedupe_key" TEXT NOT NULL,
    "tool" TEXT NOT NULL,
    "scope" TEXT,
    "key" TEXT,
    "status" TEXT NOT NULL DEFAULT 'open',
    "summary" TEXT NOT NULL,
    "evidence" JSONB NOT NULL,
    "detected_at" TIMESTAMP(3) NOT NULL,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "anomalies_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "operators" (
    "id" TEXT NOT NULL,
    "email" TEXT NOT NULL,
    "password_hash" TEXT NOT NULL,
    "role" TEXT NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL,
    "disabled_at" TIMESTAMP(3),

    CONSTRAINT "operators_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "api_tokens" (
    "id" TEXT NOT NULL,
    "scope" TEXT NOT NULL,
    "label" TEXT,
    "prefix" TEXT NOT NULL,
    "hash" TEXT NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL,
    "revoked_at" TIMESTAMP(3),
    "last_used_at" TIMESTAMP(3),

    CONSTRAINT "api_tokens_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "demo_charges" (
    "id" TEXT NOT NULL,
    "scope" TEXT NOT NULL,
    "customer_id" TEXT NOT NULL,
    "amount_cents" INTEGER NOT NULL,
    "currency" TEXT NOT NULL,
    "description" TEXT,
    "idempotency_key" TEXT,
    "created_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "demo_charges_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "demo_refunds" (
    "id" TEXT NOT NULL,
    "scope" TEXT NOT NULL,
    "charge_id" TEXT NOT NULL,
    "amount_cents" INTEGER NOT NULL,
    "idempotency_key" TEXT,
    "created_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "demo_refunds_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "demo_emails" (
    "id" TEXT NOT NULL,
    "scope" TEXT NOT NULL,
    "to" TEXT NOT NULL,
    "subject" TEXT NOT NULL,
    "body" TEXT NOT NULL,
    "idempotency_key" TEXT,
    "created_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "demo_emails_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "demo_tickets" (
    "id" TEXT NOT NULL,
    "scope" TEXT NOT NULL,
    "title" TEXT NOT NULL,
    "body" TEXT,
    "idempotency_key" TEXT,
    "created_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "demo_tickets_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "idempotency_keys_status_deadline_ms_idx" ON "idempotency_keys"("status", "deadline_ms");

-- CreateIndex
CREATE INDEX "idempotency_keys_status_tool_deadline_ms_idx" ON "idempotency_keys"("status", "tool", "deadline_ms");

-- CreateIndex
CREATE INDEX "idempotency_keys_created_at_ms_idx" ON "idempotency_keys"("created_at_ms");

-- CreateIndex
CREATE INDEX "idempotency_keys_tool_created_at_ms_idx" ON "idempotency_keys"("tool", "created_at_ms");

-- CreateIndex
CREATE INDEX "idempotency_keys_scope_created_at_ms_idx" ON "idempotency_keys"("scope", "created_at_ms");

-- CreateIndex
CREATE INDEX "executions_scope_key_started_at_idx" ON "executions"("scope", "key", "started_at");

-- CreateIndex
CREATE INDEX "executions_tool_started_at_idx" ON "executions"("tool", "started_at");

-- CreateIndex
CREATE INDEX "executions_started_at_idx" ON "executions"("started_at");

-- CreateIndex
CREATE INDEX "executions_outcome_lease_until_idx" ON "executions"("outcome", "lease_until");

-- CreateIndex
CREATE INDEX "suppressions_tool_at_idx" ON "suppressions"("tool", "at");

-- CreateIndex
CREATE INDEX "suppressions_scope_key_at_idx" ON "suppressions"("scope", "key", "at");

-- CreateIndex
CREATE INDEX "suppressions_at_idx" ON "suppressions"("at");

-- CreateIndex
CREATE INDEX "operator_actions_at_idx" ON "operator_actions"("at");

-- CreateIndex
CREATE INDEX "operator_actions_scope_key_at_idx" ON "operator_actions"("scope", "key", "at");

-- CreateIndex
CREATE UNIQUE INDEX "anomalies_dedupe_key_key" ON "anomalies"("dedupe_key");

-- CreateIndex
CREATE INDEX "anomalies_status_detected_at_idx" ON "anomalies"("status", "detected_at");

-- CreateIndex
CREATE INDEX "anomalies_detected_at_idx" ON "anomalies"("detected_at");

-- CreateIndex
CREATE UNIQUE INDEX "operators_email_key" ON "operators"("email");

-- CreateIndex
CREATE UNIQUE INDEX "api_tokens_hash_key" ON "api_tokens"("hash");

-- CreateIndex
CREATE INDEX "api_tokens_scope_idx" ON "api_tokens"("scope");

-- CreateIndex
CREATE INDEX "demo_charges_scope_customer_id_created_at_idx" ON "demo_charges"("scope", "customer_id", "created_at");

-- CreateIndex
CREATE INDEX "demo_refunds_scope_charge_id_idx" ON "demo_refunds"("scope", "charge_id");

-- CreateIndex
CREATE INDEX "demo_emails_scope_to_created_at_idx" ON "demo_emails"("scope", "to", "created_at");

-- CreateIndex
CREATE INDEX "demo_tickets_scope_created_at_idx" ON "demo_tickets"("scope", "created_at");


-- Fencing tokens of the SQL key store: strictly increasing for the whole store.
CREATE SEQUENCE IF NOT EXISTS "idempotency_token_seq";

-- Key prefix search (LIKE 'prefix%') uses this index whatever the database's collation.
CREATE INDEX "idempotency_keys_key_prefix_idx" ON "idempotency_keys" ("key" text_pattern_ops);
