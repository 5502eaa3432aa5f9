import { inject } from "vitest";
import { useMigratedEmbeddedDatabase } from "./server";

// each fault file's embedded servers start from the database the run migrated once (global-setup.ts)
useMigratedEmbeddedDatabase(inject("pgliteTemplate"));
