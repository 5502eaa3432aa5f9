-- A key's anomalies, newest first: the key page lists them, and releasing or resolving a key closes them.
CREATE INDEX "anomalies_scope_key_detected_at_idx" ON "anomalies"("scope", "key", "detected_at");
