-- The arguments of calls to upstream tools with `probe: resend`, kept while their outcome is unknown
-- so that the reconciler (or an operator's "Ask the tool") can send the same request again.
CREATE TABLE "upstream_resends" (
    "execution_id" TEXT NOT NULL,
    "scope" TEXT NOT NULL,
    "key" TEXT NOT NULL,
    "tool" TEXT NOT NULL,
    "arguments" TEXT NOT NULL,
    "sent_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "upstream_resends_pkey" PRIMARY KEY ("execution_id")
);

CREATE INDEX "upstream_resends_scope_key_sent_at_idx" ON "upstream_resends"("scope", "key", "sent_at");
CREATE INDEX "upstream_resends_sent_at_idx" ON "upstream_resends"("sent_at");
