-- Failed sign-ins, shared by every server process on this database (the limiter was per process).
-- "account" is a SHA-256 of the normalized email, so the table holds no addresses; rows older
-- than the limiter's window are purged.
CREATE TABLE "sign_in_failures" (
    "id" BIGSERIAL NOT NULL,
    "account" TEXT NOT NULL,
    "at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "sign_in_failures_pkey" PRIMARY KEY ("id")
);

CREATE INDEX "sign_in_failures_account_at_idx" ON "sign_in_failures"("account", "at");
CREATE INDEX "sign_in_failures_at_idx" ON "sign_in_failures"("at");
