import { NextResponse, type NextRequest } from "next/server";

// Tells console pages which path was asked for, so a redirect to /login can come back to it.
// Authorization itself happens in each page and route handler, not here.
export function proxy(request: NextRequest) {
  const url = request.nextUrl.clone();
  url.searchParams.delete("_rsc");
  const headers = new Headers(request.headers);
  headers.set("x-idemgate-path", url.pathname + url.search);
  return NextResponse.next({ request: { headers } });
}

export const config = {
  matcher: ["/((?!api/|_next/|favicon\\.ico|login).*)"],
};
