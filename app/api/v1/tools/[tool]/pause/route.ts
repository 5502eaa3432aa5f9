import { z } from "zod";
import { actorOf } from "@/lib/auth/actor";
import { withPrincipal } from "@/lib/auth/guard";
import { parseBody } from "@/lib/http/parse-body";
import { pauseTool } from "@/lib/operator/pause-tool";

export const dynamic = "force-dynamic";

// POST /api/v1/tools/{tool}/pause – { reason }: refuse the write tool's new first executions (503 tool_paused) in every server process
export const POST = withPrincipal<{ tool: string }>("pause_tools", async (request, { params, principal, runtime }) => {
  const { reason } = await parseBody(request, z.object({ reason: z.string().optional() }));
  return Response.json(await pauseTool(runtime, { tool: params.tool, actor: actorOf(principal), reason }));
});
