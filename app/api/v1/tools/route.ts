import { withPrincipal } from "@/lib/auth/guard";

export const dynamic = "force-dynamic";

// GET /api/v1/tools – the configured tools with their policies and argument schemas
export const GET = withPrincipal("read", async (_request, { runtime }) =>
  Response.json({ tools: runtime.registry.list().map((tool) => runtime.registry.describe(tool)) }),
);
