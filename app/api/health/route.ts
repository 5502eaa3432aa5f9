import { currentOperator } from "@/lib/auth/session";
import { healthResponse } from "@/lib/process/health";
import { getRuntime } from "@/lib/server/runtime";

export const dynamic = "force-dynamic";

// GET /api/health – 200 when the key store and the audit database both answer, else 503; the body
// is the status alone, and the details (locations, latencies, errors) for a signed-in operator
export async function GET() {
  return healthResponse(await getRuntime(), currentOperator);
}
