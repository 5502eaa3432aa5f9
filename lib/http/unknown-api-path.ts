import { errorResponse, notFound } from "./problem";

/** The answer to a path under /api/ that no route serves: problem+json 404, never the console's HTML page. */
export function unknownApiPath(request: Request): Response {
  const path = new URL(request.url).pathname;
  return errorResponse(notFound("no API route at this path; see /api/v1/openapi.json for the ones there are"), path);
}
