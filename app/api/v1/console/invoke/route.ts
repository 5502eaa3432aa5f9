import { consoleInvoke, consoleInvokeSchema } from "@/lib/gateway/console-invoke";
import { forbidden } from "@/lib/http/problem";
import { parseBody } from "@/lib/http/parse-body";
import { withPrincipal } from "@/lib/auth/guard";
import { MAX_BODY_BYTES } from "@/lib/http/read-body";

export const dynamic = "force-dynamic";

// POST /api/v1/console/invoke – { tool, scope, key?, session?, arguments } run through the gateway for a signed-in operator
export const POST = withPrincipal("invoke", async (request, { principal, runtime }) => {
  // withPrincipal refuses tokens for anything but reads; this is the console's own route regardless
  if (principal.kind !== "operator") throw forbidden("the console invoke route is for signed-in operators; API callers use /api/v1/tools/{tool}/invoke");
  const input = await parseBody(request, consoleInvokeSchema, MAX_BODY_BYTES + 16 * 1024);
  return Response.json(await consoleInvoke(input, principal.operator, runtime), { headers: { "Cache-Control": "no-store" } });
});
