-- At most one execution without an outcome per key: the audit log itself refuses a second
-- concurrent execution of one action, even when the key store lost the reservation that should
-- have prevented it (a flush between one caller's reservation and its intent).
CREATE UNIQUE INDEX "executions_one_open_per_key" ON "executions" ("scope", "key") WHERE "outcome" IS NULL;
