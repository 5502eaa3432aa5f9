-- Console sessions are kept by the SHA-256 of their id, as API tokens are: the id itself lives only
-- in the sealed cookie, so the database (a backup, a replica, a read-only role) names no session a
-- cookie could carry. The ids kept until now were in plaintext and cannot be told from hashes, so
-- every existing session ends here: operators sign in again once after this upgrade.
DELETE FROM "operator_sessions";

-- AlterTable
ALTER TABLE "operator_sessions" DROP CONSTRAINT "operator_sessions_pkey",
DROP COLUMN "id",
ADD COLUMN     "id_hash" TEXT NOT NULL,
ADD CONSTRAINT "operator_sessions_pkey" PRIMARY KEY ("id_hash");

