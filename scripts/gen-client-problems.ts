// Writes the clients' copies of the server's problem table: `npx tsx scripts/gen-client-problems.ts`.
// lib/docs/client-problems.test.ts fails when a generated file is not what this would write.
import { writeFileSync } from "node:fs";
import path from "node:path";
import { PYTHON_PROBLEMS_FILE, renderPythonProblems, renderTsRetryList, TS_RETRY_FILE } from "@/lib/docs/client-problems";

const root = path.resolve(import.meta.dirname, "..");
writeFileSync(path.join(root, PYTHON_PROBLEMS_FILE), renderPythonProblems());
writeFileSync(path.join(root, TS_RETRY_FILE), renderTsRetryList());
console.log(`wrote ${PYTHON_PROBLEMS_FILE} and ${TS_RETRY_FILE}`);
