/**
 * The console's client components talk to the same /api/v1 routes as any other client, with the
 * session cookie; those routes check the role again. Errors keep the API's problem+json detail.
 */
export interface Problem {
  type?: string;
  title?: string;
  status?: number;
  detail?: string;
  errors?: { path: string; message: string }[];
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly problem: Problem,
  ) {
    super(problem.detail ?? problem.title ?? `HTTP ${status}`);
    this.name = "ApiError";
  }
}

export async function apiFetch<T>(path: string, init?: RequestInit & { json?: unknown }): Promise<T> {
  const { json, ...rest } = init ?? {};
  const res = await fetch(path, {
    ...rest,
    headers: { Accept: "application/json", ...(json !== undefined ? { "Content-Type": "application/json" } : {}), ...rest.headers },
    body: json !== undefined ? JSON.stringify(json) : rest.body,
    credentials: "same-origin",
    cache: "no-store",
  });
  const text = await res.text();
  let body: unknown = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  if (!res.ok) {
    const problem = body && typeof body === "object" ? (body as Problem) : { title: res.statusText, detail: text.slice(0, 300) || undefined };
    throw new ApiError(res.status, { status: res.status, ...problem });
  }
  return body as T;
}

/** /api/v1/keys/{scope}/{key}, each segment encoded */
export function keyPath(scope: string, key: string): string {
  return `/api/v1/keys/${encodeURIComponent(scope)}/${encodeURIComponent(key)}`;
}

/** the console page of one key */
export function keyHref(scope: string, key: string): string {
  return `/keys/${encodeURIComponent(scope)}/${encodeURIComponent(key)}`;
}
