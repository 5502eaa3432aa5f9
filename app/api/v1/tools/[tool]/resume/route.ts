import { z } from "zod";
import { actorOf } from "@/lib/auth/actor";
import { withPrincipal } from "@/lib/auth/guard";
import { parseBody } from "@/lib/http/parse-body";
import { resumeTool } from "@/lib/operator/pause-tool";

export const dynamic = "force-dynamic";

// POST /api/v1/tools/{tool}/resume – { reason }: the paused write tool's new calls run again
export const POST = withPrincipal<{ tool: string }>("pause_tools", async (request, { params, principal, runtime }) => {
  const { reason } = await parseBody(request, z.object({ reason: z.string().optional() }));
  return Response.json(await resumeTool(runtime, { tool: params.tool, actor: actorOf(principal), reason }));
});
