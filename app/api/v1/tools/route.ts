import { withPrincipal } from "@/lib/auth/guard";
import { toolListing } from "@/lib/operator/pause-tool";

export const dynamic = "force-dynamic";

// GET /api/v1/tools – the configured tools with their policies, argument schemas and pauses
export const GET = withPrincipal("read", async (_request, { runtime }) => Response.json(toolListing(runtime)));
